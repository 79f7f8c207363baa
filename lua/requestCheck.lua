-- requestCheck: make check types of a polled card due now (docs/design.md, 'Lua scripts').
--
-- Input:
--   KEYS[1] due      HASH card state
--   KEYS[2] prio     ZSET priority lane
--   KEYS[3] queue    ZSET normal lane
--   KEYS[4] claim    STRING claim token
--   KEYS[5] running  ZSET lease expiry per token
--   ARGV[1] now ms ('' = Redis TIME)
--   ARGV[2] card id
--   ARGV[3] cooldown ms (0 = none): a type whose last success is younger is skipped
--   ARGV[4] confirmation delays, seconds, comma-separated ('' = none: cfm/exp left untouched)
--   ARGV[5] expected confirmation result ('' = none)
--   ARGV[6] lane: '1' priority, '0' normal (manual trigger)
--   ARGV[7..] check types
-- Output:
--   n  number of types requested (0 = all within cooldown; nothing else changed)
--   -1 the card is not polled in this account (in no lane)
--   -2 invalid argument
--
-- For each requested type: due:t = min(due:t, now) and req:t = now (the latest request). req:t is what makes a request that lands
-- while the card executes survive finish (finish keeps due:t <= req:t for requests made after the
-- claim). A card whose claim is alive is left where it is (priority: prio = 1 so finish moves it to
-- the priority lane); otherwise it is scored min(score, now), in the priority lane for 'priority'.
--@include now
--@include lease
--@include dueHash

local dueKey, prioKey, queueKey, claimKey, runningKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now = resolveNow(ARGV[1])
local cardId = ARGV[2]
local cooldown = tonumber(ARGV[3])
local delays, expected = ARGV[4], ARGV[5]
local toPriority = ARGV[6] == '1'
if now == nil or cooldown == nil or cooldown < 0 or #ARGV < 7 then return -2 end

local prioScore = tonumber(redis.call('ZSCORE', prioKey, cardId))
local queueScore = tonumber(redis.call('ZSCORE', queueKey, cardId))
if (prioScore == nil and queueScore == nil) or redis.call('EXISTS', dueKey) == 0 then return -1 end

local requested = 0
for i = 7, #ARGV do
  local t = ARGV[i]
  local lastOk = tonumber(redis.call('HGET', dueKey, F_OK .. t))
  if not (cooldown > 0 and lastOk and lastOk > 0 and now - lastOk < cooldown) then
    -- A request never delays a type that is already due earlier.
    local due = tonumber(redis.call('HGET', dueKey, F_DUE .. t))
    if due == nil or due > now then due = now end
    redis.call('HSET', dueKey, F_DUE .. t, due, F_REQ .. t, now)
    if delays ~= '' then
      redis.call('HSET', dueKey, F_CFM .. t, delays)
      if expected ~= '' then
        redis.call('HSET', dueKey, F_EXP .. t, expected)
      else
        redis.call('HDEL', dueKey, F_EXP .. t)
      end
    end
    requested = requested + 1
  end
end
if requested == 0 then return 0 end

local current = redis.call('GET', claimKey)
local claimed = current and liveClaimExpiry(claimKey, runningKey, current, now) ~= nil
if toPriority then
  redis.call('HSET', dueKey, F_PRIO, '1')
  if claimed then return requested end
  local score = now
  local old = prioScore or queueScore
  if old < score then score = old end
  redis.call('ZREM', queueKey, cardId)
  redis.call('ZADD', prioKey, score, cardId)
  return requested
end
if claimed then return requested end
-- LT: never delays a card that is already overdue.
if prioScore ~= nil then
  redis.call('ZADD', prioKey, 'LT', now, cardId)
else
  redis.call('ZADD', queueKey, 'LT', now, cardId)
end
return requested
