-- observed: a pushed carrier event showed a card's state of one type (docs/design.md, 'Freshness'):
-- what a successful check of that type would have learned, without a call. The type's next check
-- moves out to the event's time + the type's interval, and a pending delayed confirmation whose
-- expected state the event shows is reached.
--
-- Input:
--   KEYS[1] due      HASH card state
--   KEYS[2] prio     ZSET priority lane
--   KEYS[3] queue    ZSET normal lane
--   KEYS[4] claim    STRING claim token
--   KEYS[5] running  ZSET lease expiry per token
--   ARGV[1] now ms ('' = Redis TIME)
--   ARGV[2] card id
--   ARGV[3] check type
--   ARGV[4] observed at (ms): when the carrier saw the state
--   ARGV[5] the type's interval (ms, > 0)
--   ARGV[6] the state the event shows, as a confirmation compares it ('' = none for this type)
-- Output:
--   1 due moved out; 2 confirmation reached (cfm/exp cleared) and due moved out;
--   0 nothing moved: the type is not polled, a check already saw a state at least as recent, a
--     request-check of the type is pending (it stays: an operator asked for a call), or a pending
--     confirmation expects another state (its own schedule keeps asking);
--   -1 the card is not in Redis; -2 invalid argument
--
-- `ok:t` (last success, which request-check cooldowns read) moves forward to the event's time. A
-- live claim keeps the lane score at least at its lease expiry, as upsert does; its finish, planned
-- before the event, sets the type's due as a check's success does.
--@include now
--@include lease
--@include dueHash

local dueKey, prioKey, queueKey, claimKey, runningKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now = resolveNow(ARGV[1])
local cardId, t = ARGV[2], ARGV[3]
local observedAt, interval, state = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
if now == nil or cardId == '' or t == '' or observedAt == nil or interval == nil or interval <= 0 then return -2 end

if redis.call('EXISTS', dueKey) == 0 then return -1 end
local due = tonumber(redis.call('HGET', dueKey, F_DUE .. t))
if due == nil then return 0 end
local ok = tonumber(redis.call('HGET', dueKey, F_OK .. t))
if ok ~= nil and ok >= observedAt then return 0 end
redis.call('HSET', dueKey, F_OK .. t, observedAt)

if redis.call('HEXISTS', dueKey, F_REQ .. t) == 1 then return 0 end

local reached = 0
local expected = redis.call('HGET', dueKey, F_EXP .. t)
if expected then
  if state == '' or state ~= expected then return 0 end
  redis.call('HDEL', dueKey, F_CFM .. t, F_EXP .. t)
  reached = 1
end

local nextDue = observedAt + interval
if nextDue <= due and reached == 0 then return 0 end
if nextDue > due or reached == 1 then redis.call('HSET', dueKey, F_DUE .. t, nextDue) end

-- The lane score is the card's earliest due, never below a live claim's lease expiry.
local earliest = nil
local fields = redis.call('HGETALL', dueKey)
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, #F_DUE) == F_DUE then
    local d = tonumber(fields[i + 1])
    if d ~= nil and (earliest == nil or d < earliest) then earliest = d end
  end
end
local score = earliest or (now + NO_DUE_RETRY_MS)
local current = redis.call('GET', claimKey)
if current then
  local expiry = liveClaimExpiry(claimKey, runningKey, current, now)
  if expiry and expiry > score then score = expiry end
end
scoreInItsLane(prioKey, queueKey, cardId, score)
return 1 + reached
