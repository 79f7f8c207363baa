--[[
  rateLimit — shared limiter of one (carrier account, rate-limit group); docs/design.md, 'Limiter'.

  Sliding window with reservations, at arrival: every granted call is a ZSET member scored with
  the latest time it may reach the carrier — its slot (now, or a reserved time in the future) plus
  its tolerance (how late after the slot its caller may still send it: the caller's measured
  grant-to-send delay, at most MAX_TOLERANCE ms; a caller that misses it gives the slot back and
  asks again). A call never arrives before its slot. So `rate` calls plus one can share one
  carrier window of `window` ms only if the last one's slot is less than `window` after the
  earliest of their latest arrivals; slots are given so that this never happens, whichever
  processes asked and whatever tolerance each one has:
    - not before the rate-th latest score + window (no window reaching back holds `rate` calls);
    - and, when calls reserved further ahead could land in a window with this one (a score within
      [this call's score, + window + MAX_TOLERANCE)), not before the latest score (appended last).
  A caller whose slot lies in the future sleeps until it (no polling, no herd of waiters) and
  confirms it (pushback may have voided it) up to COMMIT_LEAD ms before it.

  Carrier pushback (AIMD), state in KEYS[2] (same hash tag as KEYS[1]):
    on `pushback` (the carrier answered rate_limited): pause for retry-after, remember the refused
    rate as the ceiling, multiply the rate by the decrease factor. Reports within the hold time of
    the last decrease belong to the same burst and are ignored (one burst halves once).
    recovery (computed lazily on every call): +1 QPS per recovery step while below ceiling − 1,
    then +1 QPS per (longer) probe step, up to the configured rate; reaching it deletes the state.

  Time: ARGV[2] when given (tests), else Redis TIME, so every process shares the server's clock;
  callers only ever use returned durations, never compare these times with their own clock.

  Input:
    KEYS[1]  window ZSET   member = call id, score = slot + tolerance (ms): latest arrival
    KEYS[2]  state HASH    rate, ceil, since (time of the last rate step), pause (paused until),
                           hold (ignore pushback until); absent = running at the configured rate
    ARGV[1]  op            'acquire' | 'confirm' | 'cancel' | 'peek' | 'pushback'
    ARGV[2]  now ms        '' = Redis TIME
    ARGV[3]  configured rate (calls per window, integer >= 1)
    ARGV[4]  window ms     the carrier's window (1000)
    ARGV[5]  call id       (acquire, confirm, cancel) '<tolerance ms>:<unique>'; the tolerance is
                           clamped to [0, MAX_TOLERANCE] (absent = MAX_TOLERANCE)
    ARGV[6]  retry after ms (pushback) '' = ARGV[7]
    ARGV[7]  default pause ms
    ARGV[8]  decrease factor (0 < f < 1)
    ARGV[9]  min rate (>= 1)
    ARGV[10] recovery step ms
    ARGV[11] probe step ms
    ARGV[12] state ttl ms
    ARGV[13] max wait ms   (acquire) reserve a slot at most this far ahead; '' = 0 (now or never)
  Output: { result, waitMs, effectiveRate, remaining, nowMs, pausedUntilMs, ahead, slotMs }
    acquire:  result 1 = slot reserved, call after waitMs (0 = now) and confirm if waitMs > 0;
              slotMs = the slot (floored; the limiter's clock, like nowMs);
              result 0 = the earliest slot is waitMs away, beyond max wait: nothing reserved
    confirm:  result 1 = the reservation stands (and will: pushback spares slots due within
              COMMIT_LEAD, and callers confirm no earlier), 0 = pushback voided it
    cancel:   result 1 = the call's slot was given back (it was never sent), 0 = it was not there
    peek:     result 1; waitMs = time to the earliest slot (at MAX_TOLERANCE); reserves nothing
    pushback: result 1 = applied, 0 = ignored (same burst as the last decrease)
    remaining = slots still free in the current window, reservations counted (0 while paused)
    ahead = reservations for slots after now: calls already waiting, which the next second's
            capacity serves first (the claim's budget for a round is the rate minus these); peek
            only — a refused acquire returns an upper bound (it also counts calls sent just now)
]]

-- Largest tolerance a call may have (ms); src/ratelimit/limiter.ts caps its margin at the same.
local MAX_TOLERANCE = 100
-- A reservation due within this long (ms) is committed: its holder may have confirmed it already
-- (callers confirm up to this early, src/ratelimit/limiter.ts CONFIRM_LEAD_MS), so pushback spares it.
local COMMIT_LEAD = 20

-- Exclusive score bound. `..` would format with 14 significant digits and cut the sub-ms part
-- of epoch-ms scores; %.17g keeps every digit.
local function exclusive(score)
  return '(' .. string.format('%.17g', score)
end
local function inclusive(score)
  return string.format('%.17g', score)
end

local windowKey = KEYS[1]
local stateKey = KEYS[2]

local op = ARGV[1]
local now = tonumber(ARGV[2])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local configured = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
local callId = ARGV[5]
local defaultPause = tonumber(ARGV[7])
local retryAfter = tonumber(ARGV[6]) or defaultPause
local factor = tonumber(ARGV[8])
local minRate = tonumber(ARGV[9])
local recoveryStep = tonumber(ARGV[10])
local probeStep = tonumber(ARGV[11])
local stateTtl = tonumber(ARGV[12])
local maxWait = tonumber(ARGV[13]) or 0

local function toleranceOf(member)
  local tolerance = tonumber(string.match(member, '^(%d+):'))
  if tolerance == nil or tolerance > MAX_TOLERANCE then return MAX_TOLERANCE end
  return tolerance
end

-- Members whose slot (score − tolerance) lies after t. Scores above t + MAX_TOLERANCE all do;
-- only the band below needs each member's tolerance.
local function bandAfter(t)
  local found = {}
  local band = redis.call('ZRANGEBYSCORE', windowKey, exclusive(t), inclusive(t + MAX_TOLERANCE), 'WITHSCORES')
  for i = 1, #band, 2 do
    if tonumber(band[i + 1]) - toleranceOf(band[i]) > t then found[#found + 1] = band[i] end
  end
  return found
end

-- Pushback state with lazy recovery up to now.
local s = redis.call('HMGET', stateKey, 'rate', 'ceil', 'since', 'pause', 'hold')
local hasState = s[1] ~= false
local rate = tonumber(s[1]) or configured
local ceil = tonumber(s[2]) or 0
local since = tonumber(s[3]) or now
local pause = tonumber(s[4]) or 0
local hold = tonumber(s[5]) or 0
if rate > configured then rate = configured end
local stepped = false
while rate < configured do
  -- Close to the rate the carrier last refused, probe slowly; below it, recover quickly.
  local step = recoveryStep
  if ceil > 0 and rate + 1 >= ceil then step = probeStep end
  if now < since + step then break end
  since = since + step
  rate = rate + 1
  stepped = true
end

local function saveState()
  if rate >= configured and pause <= now and hold <= now then
    redis.call('DEL', stateKey)
    return
  end
  redis.call('HSET', stateKey, 'rate', rate, 'ceil', ceil, 'since', since, 'pause', pause, 'hold', hold)
  redis.call('PEXPIRE', stateKey, stateTtl)
end

if op == 'pushback' then
  if now < hold then
    return { 0, 0, rate, 0, math.floor(now), math.floor(pause) }
  end
  ceil = rate
  rate = math.max(minRate, math.floor(rate * factor))
  -- Reservations made at the old rate are void; their holders find out when they confirm. Calls
  -- whose slot has come, or is due within COMMIT_LEAD, stay: they may be on their way already.
  redis.call('ZREMRANGEBYSCORE', windowKey, exclusive(now + COMMIT_LEAD + MAX_TOLERANCE), '+inf')
  for _, member in ipairs(bandAfter(now + COMMIT_LEAD)) do redis.call('ZREM', windowKey, member) end
  pause = now + retryAfter
  since = pause
  hold = now + math.max(retryAfter, window)
  saveState()
  return { 1, 0, rate, 0, math.floor(now), math.floor(pause) }
end

if hasState and stepped then saveState() end

if op == 'confirm' then
  -- A reservation survives unless carrier pushback cancelled it meanwhile.
  local kept = 0
  if redis.call('ZSCORE', windowKey, callId) then kept = 1 end
  return { kept, 0, rate, 0, math.floor(now), math.floor(pause) }
end

if op == 'cancel' then
  -- The caller could not send within its slot and never will: the slot is free again.
  return { redis.call('ZREM', windowKey, callId), 0, rate, 0, math.floor(now), math.floor(pause) }
end

redis.call('ZREMRANGEBYSCORE', windowKey, '-inf', now - window)
local count = redis.call('ZCARD', windowKey)

-- Earliest slot: not before now nor the end of a pause; with `rate` calls (past or reserved) that
-- may still arrive within the window, not before the rate-th latest of them leaves it.
local tolerance = MAX_TOLERANCE
if op == 'acquire' then tolerance = toleranceOf(callId) end
local slot = math.max(now, pause)
if count >= rate then
  local entry = redis.call('ZRANGE', windowKey, count - rate, count - rate, 'WITHSCORES')
  slot = math.max(slot, tonumber(entry[2]) + window)
end
-- Calls reserved further ahead (or left by a rate change) that could share a window with this one
-- as its earliest: with `rate` of them, go after the latest score instead.
if redis.call('ZCOUNT', windowKey, inclusive(slot + tolerance), exclusive(slot + tolerance + window + MAX_TOLERANCE)) >= rate then
  local last = redis.call('ZRANGE', windowKey, -1, -1, 'WITHSCORES')
  slot = math.max(slot, tonumber(last[2]))
end
local wait = slot - now
local reserved = redis.call('ZCOUNT', windowKey, exclusive(now - window), '+inf')

if op == 'acquire' and wait <= maxWait then
  redis.call('ZADD', windowKey, inclusive(slot + tolerance), callId)
  -- Keep the key until the latest slot (possibly reserved by another caller) leaves its window.
  local latest = redis.call('ZRANGE', windowKey, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', windowKey, math.ceil(tonumber(latest[2]) + window - now))
  return { 1, math.ceil(wait), rate, math.max(0, rate - reserved - 1), math.floor(now), math.floor(pause), 0, math.floor(slot) }
end

local remaining = 0
if pause <= now then remaining = math.max(0, rate - reserved) end
local result = 0
if op == 'peek' then result = 1 end
-- Exact for peek (the claim's budget); a refused acquire gets the cheap upper bound, which also
-- counts calls whose slot came less than their tolerance ago.
local ahead
if op == 'peek' then
  ahead = redis.call('ZCOUNT', windowKey, exclusive(now + MAX_TOLERANCE), '+inf') + #bandAfter(now)
else
  ahead = redis.call('ZCOUNT', windowKey, exclusive(now), '+inf')
end
return { result, math.ceil(wait), rate, remaining, math.floor(now), math.floor(pause), ahead }
