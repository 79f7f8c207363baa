--[[
  rateLimit — shared limiter of one (carrier account, rate-limit group), DESIGN §5.

  Sliding window with reservations: every granted call is a ZSET member scored with its slot time
  (now, or a reserved time in the future). A slot is given only where every window of `window` ms
  holding it has fewer than `rate` slots, so no window ever holds more than `rate` calls, whichever
  processes asked. A caller whose slot lies in the future sleeps until it (no polling, no herd of
  waiters) and then confirms it (pushback may have voided it). The caller passes
  window = 1000 ms + a safety margin: the gap between the grant here and the call's arrival at the
  carrier varies by a few ms per call, and the margin keeps the carrier's own one-second windows
  (measured at arrival) within the rate too.

  Carrier pushback (AIMD), state in KEYS[2] (same hash tag as KEYS[1]):
    on `pushback` (the carrier answered rate_limited): pause for retry-after, remember the refused
    rate as the ceiling, multiply the rate by the decrease factor. Reports within the hold time of
    the last decrease belong to the same burst and are ignored (one burst halves once).
    recovery (computed lazily on every call): +1 QPS per recovery step while below ceiling − 1,
    then +1 QPS per (longer) probe step, up to the configured rate; reaching it deletes the state.

  Time: ARGV[2] when given (tests), else Redis TIME, so every process shares the server's clock;
  callers only ever use returned durations, never compare these times with their own clock.

  Input:
    KEYS[1]  window ZSET   member = call id, score = grant time (ms)
    KEYS[2]  state HASH    rate, ceil, since (time of the last rate step), pause (paused until),
                           hold (ignore pushback until); absent = running at the configured rate
    ARGV[1]  op            'acquire' | 'confirm' | 'peek' | 'pushback'
    ARGV[2]  now ms        '' = Redis TIME
    ARGV[3]  configured rate (calls per window, integer >= 1)
    ARGV[4]  window ms
    ARGV[5]  call id       (acquire, confirm) unique member of the call's slot
    ARGV[6]  retry after ms (pushback) '' = ARGV[7]
    ARGV[7]  default pause ms
    ARGV[8]  decrease factor (0 < f < 1)
    ARGV[9]  min rate (>= 1)
    ARGV[10] recovery step ms
    ARGV[11] probe step ms
    ARGV[12] state ttl ms
    ARGV[13] max wait ms   (acquire) reserve a slot at most this far ahead; '' = 0 (now or never)
  Output: { result, waitMs, effectiveRate, remaining, nowMs, pausedUntilMs, ahead }
    acquire:  result 1 = slot reserved, call after waitMs (0 = now) and confirm if waitMs > 0;
              result 0 = the earliest slot is waitMs away, beyond max wait: nothing reserved
    confirm:  result 1 = the reservation stands, 0 = pushback voided it
    peek:     result 1; waitMs = time to the earliest slot; reserves nothing
    pushback: result 1 = applied, 0 = ignored (same burst as the last decrease)
    remaining = slots still free in the current window, reservations counted (0 while paused)
    ahead = reservations for slots after now: calls already waiting, which the next second's
            capacity serves first (the claim's budget for a round is the rate minus these)
]]

-- Exclusive score bound. `..` would format with 14 significant digits and cut the sub-ms part
-- of epoch-ms scores; %.17g keeps every digit.
local function exclusive(score)
  return '(' .. string.format('%.17g', score)
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
  -- Reservations made at the old rate are void; their holders find out when they confirm.
  redis.call('ZREMRANGEBYSCORE', windowKey, exclusive(now), '+inf')
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

redis.call('ZREMRANGEBYSCORE', windowKey, '-inf', now - window)
local count = redis.call('ZCARD', windowKey)

-- Earliest slot: not before now nor the end of a pause; with `rate` grants (past or reserved) in
-- the window, not before the (count - rate + 1)-th newest one leaves it.
local slot = math.max(now, pause)
if count >= rate then
  local entry = redis.call('ZRANGE', windowKey, count - rate, count - rate, 'WITHSCORES')
  slot = math.max(slot, tonumber(entry[2]) + window)
end
-- Safety net for rate changes (configured or pushback) that leave reservations beyond the slot:
-- every window holding the slot must have room. If not, go after the last entry's window.
if redis.call('ZCOUNT', windowKey, exclusive(slot - window), exclusive(slot + window)) >= rate then
  local last = redis.call('ZRANGE', windowKey, -1, -1, 'WITHSCORES')
  slot = math.max(slot, tonumber(last[2]) + window)
end
local wait = slot - now
local reserved = redis.call('ZCOUNT', windowKey, exclusive(now - window), '+inf')

if op == 'acquire' and wait <= maxWait then
  redis.call('ZADD', windowKey, slot, callId)
  -- Keep the key until the latest slot (possibly reserved by another caller) leaves its window.
  local latest = redis.call('ZRANGE', windowKey, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', windowKey, math.ceil(tonumber(latest[2]) + window - now))
  return { 1, math.ceil(wait), rate, math.max(0, rate - reserved - 1), math.floor(now), math.floor(pause) }
end

local remaining = 0
if pause <= now then remaining = math.max(0, rate - reserved) end
local result = 0
if op == 'peek' then result = 1 end
local ahead = redis.call('ZCOUNT', windowKey, exclusive(now), '+inf')
return { result, math.ceil(wait), rate, remaining, math.floor(now), math.floor(pause), ahead }
