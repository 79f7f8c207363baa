-- finish: write an execution's business result and hand the card back to its lane (DESIGN §4.4).
--
-- Input:
--   KEYS[1] due      HASH card state
--   KEYS[2] claim    STRING claim token
--   KEYS[3] exec     STRING execution right
--   KEYS[4] running  ZSET lease expiry per token
--   KEYS[5] prio     ZSET priority lane
--   KEYS[6] queue    ZSET normal lane
--   KEYS[7] fin      STRING the card's last recorded finish `<token>|<reply>|<record>`
--   ARGV[1] token
--   ARGV[2] card id
--   ARGV[3] now ms ('' = Redis TIME)
--   ARGV[4] '1' = the caller lost its lease (a renew failed): finish as a stale token even when
--           the claim still names it, so nothing is released or rescored; else ''
--   ARGV[5] result record: the caller's result, opaque here ('' = none: nothing stored or replayed)
--   ARGV[6] record TTL ms (> 0 when a record is given)
--   ARGV[7] n = number of field/value pairs to set
--   ARGV[8 .. 7+2n] field, value pairs to set in the due hash
--   ARGV[8+2n ..] fields to delete from the due hash
-- Output:
--    1 the token owned a live claim: claim, exec right and running entry released; the card (if
--      still polled) is scored by its earliest due:* (now + 1 h when none), in the priority lane
--      when prio = 1, else in the normal lane
--    0 the token no longer owns the claim, or ARGV[4] = '1' (result written as described below,
--      nothing released)
--   {1|0, record} replay: a finish by this token with a record already landed; nothing applied,
--      the first call's reply and record are returned
--   -2 invalid argument
--
-- At most once per token: a finish with a record stores `<token>|<reply>|<record>` in KEYS[7]
-- (PX = ARGV[6]) together with its writes, and a later finish by the same token with a record
-- (a retried activity that recomputed its result from the already updated hash) gets that back
-- instead of counting a failure twice. One key per card: a newer token's finish replaces it.
--
-- Fixes over the seed:
--  * a card in no lane (or without a due hash) was removed from polling: the result is not
--    written, so a stale hash is never recreated, and the card is not re-added;
--  * a request-check made after the claim (req:t >= claim time `clm`; a tie counts as after, since
--    re-running is safe and losing is not) is never lost: due:t is kept <= req:t, and the request's
--    cfm:t/exp:t win over this execution's. Requests before the claim were served by this
--    execution and their req:t is dropped. Without `clm` (the hash was
--    recreated during the execution) every request counts as made after the claim;
--  * a stale finish (token lost its claim) still records what the gateway said, but never moves
--    a due:t later than it is, nor touches cfm:t/exp:t: the current owner decides those.
--@include now
--@include lease
--@include dueHash

local dueKey, claimKey, execKey, runningKey, prioKey, queueKey, finKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local token, cardId = ARGV[1], ARGV[2]
local now = resolveNow(ARGV[3])
local leaseLost = ARGV[4] == '1'
local record = ARGV[5]
local recordTtl = tonumber(ARGV[6])
local nSet = tonumber(ARGV[7])
if now == nil or token == '' or nSet == nil or nSet < 0 or 7 + 2 * nSet > #ARGV then return -2 end
if record ~= '' and (recordTtl == nil or recordTtl <= 0) then return -2 end

if record ~= '' then
  local previous = redis.call('GET', finKey)
  local mine = token .. '|'
  if previous and string.sub(previous, 1, #mine) == mine then
    return {tonumber(string.sub(previous, #mine + 1, #mine + 1)), string.sub(previous, #mine + 3)}
  end
end
-- Every reply below is final for this token: stored with the record, so a retry replays it.
local function reply(code)
  if record ~= '' then redis.call('SET', finKey, token .. '|' .. code .. '|' .. record, 'PX', recordTtl) end
  return code
end

local owned = not leaseLost and liveClaimExpiry(claimKey, runningKey, token, now) ~= nil
local inLane = redis.call('ZSCORE', prioKey, cardId) or redis.call('ZSCORE', queueKey, cardId)
local hasHash = redis.call('EXISTS', dueKey) == 1
if not inLane or not hasHash then
  -- A lane entry without state cannot be executed: drop it rather than poll it forever.
  if not hasHash then
    redis.call('ZREM', prioKey, cardId)
    redis.call('ZREM', queueKey, cardId)
  end
  if owned then
    clearClaim(claimKey, execKey, runningKey, token)
    return reply(1)
  end
  return reply(0)
end

local claimedAt = tonumber(redis.call('HGET', dueKey, F_CLAIMED_AT)) or -1

-- Per type touched by this result: the floor its due:t may not exceed, nil when unprotected.
local floors = {}
local protected = {}
local function typeOf(field)
  for _, p in ipairs({F_DUE, F_CFM, F_EXP}) do
    if string.sub(field, 1, #p) == p then return string.sub(field, #p + 1) end
  end
  return nil
end
local function protect(t)
  if protected[t] ~= nil then return protected[t] end
  local req = tonumber(redis.call('HGET', dueKey, F_REQ .. t))
  local floor = nil
  if owned then
    if req and req >= claimedAt then floor = req end
  else
    floor = tonumber(redis.call('HGET', dueKey, F_DUE .. t))
    if req and (floor == nil or req < floor) then floor = req end
  end
  protected[t] = (floor ~= nil) or not owned
  floors[t] = floor
  return protected[t]
end
local function writable(field)
  local t = typeOf(field)
  if t == nil then return true end
  -- The due of a protected type is written and clamped below; its confirmation is not ours.
  if string.sub(field, 1, #F_DUE) == F_DUE then protect(t) return true end
  return not protect(t)
end

local idx = 8
for _ = 1, nSet do
  if writable(ARGV[idx]) then redis.call('HSET', dueKey, ARGV[idx], ARGV[idx + 1]) end
  idx = idx + 2
end
while idx <= #ARGV do
  if writable(ARGV[idx]) then redis.call('HDEL', dueKey, ARGV[idx]) end
  idx = idx + 1
end
-- Requests after the claim also cover types this result did not mention.
if owned then
  local fields = redis.call('HGETALL', dueKey)
  for i = 1, #fields, 2 do
    local f = fields[i]
    if string.sub(f, 1, #F_REQ) == F_REQ then
      local t = string.sub(f, #F_REQ + 1)
      local req = tonumber(fields[i + 1])
      if req and req >= claimedAt then
        protect(t)
      else
        -- Served by this execution (requested before the claim).
        redis.call('HDEL', dueKey, f)
      end
    end
  end
end
for t, floor in pairs(floors) do
  local due = tonumber(redis.call('HGET', dueKey, F_DUE .. t))
  if due == nil or due > floor then redis.call('HSET', dueKey, F_DUE .. t, floor) end
end

if not owned then return reply(0) end
clearClaim(claimKey, execKey, runningKey, token)
redis.call('HDEL', dueKey, F_CLAIMED_AT)
local score = earliestDue(dueKey) or (now + NO_DUE_RETRY_MS)
if redis.call('HGET', dueKey, F_PRIO) == '1' then
  redis.call('ZREM', queueKey, cardId)
  redis.call('ZADD', prioKey, score, cardId)
else
  redis.call('ZREM', prioKey, cardId)
  redis.call('ZADD', queueKey, score, cardId)
end
return reply(1)
