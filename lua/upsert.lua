-- upsert: put a card under polling in this account with its due times, in one step
-- (docs/design.md, 'Lua scripts').
--
-- Input:
--   KEYS[1] due      HASH card state
--   KEYS[2] prio     ZSET priority lane
--   KEYS[3] queue    ZSET normal lane
--   KEYS[4] claim    STRING claim token
--   KEYS[5] running  ZSET lease expiry per token
--   ARGV[1] now ms ('' = Redis TIME)
--   ARGV[2] carrier account id (stored in the hash's `carrier`)
--   ARGV[3] card id
--   ARGV[4..] pairs: check type, due — the types the card is polled for. The due is either
--            `<ms>`: written as given, or
--            `<init>,<cap>` (ms each; a conditional write: lifecycle, relay and rebuild): the
--            type's due already in the hash is kept, lowered to `<cap>` when later; `<init>` is
--            written only when the hash has none. So a writer that read the due earlier never
--            puts back a stale one over what a finish or another writer set since, and never
--            moves a due later than the hash has it (docs/design.md, 'Lifecycle').
-- Output:
--   1 upserted, 0 removed (no types given: card dropped from both lanes, hash deleted)
--   -2 invalid argument
--
-- `due:t` of other types is deleted with its pending request `req:t`. A pending request
-- (req:t present) keeps due:t <= req:t so a lifecycle update never loses it (I5). The card stays in
-- the priority lane if it is there, else goes to the normal lane, scored by its earliest due; while
-- a live claim exists the score is not lowered below the lease expiry (claim would push it back),
-- and `ups` = 1 marks the hash: the execution in flight was planned before this upsert, so its
-- finish keeps the dues it would drop as no longer polled (finish.lua).
--@include now
--@include lease
--@include dueHash

local dueKey, prioKey, queueKey, claimKey, runningKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now = resolveNow(ARGV[1])
local carrier, cardId = ARGV[2], ARGV[3]
if now == nil or carrier == '' or cardId == '' or (#ARGV - 3) % 2 ~= 0 then return -2 end

if #ARGV == 3 then
  redis.call('ZREM', prioKey, cardId)
  redis.call('ZREM', queueKey, cardId)
  redis.call('DEL', dueKey)
  return 0
end

local wanted = {}
local earliest = nil
for i = 4, #ARGV, 2 do
  local t = ARGV[i]
  local due = tonumber(ARGV[i + 1])
  if due == nil then
    local init, cap = string.match(ARGV[i + 1], '^(%-?%d+),(%-?%d+)$')
    if init == nil then return -2 end
    init, cap = tonumber(init), tonumber(cap)
    local current = tonumber(redis.call('HGET', dueKey, F_DUE .. t))
    if current == nil then due = init elseif current > cap then due = cap else due = current end
  end
  local req = tonumber(redis.call('HGET', dueKey, F_REQ .. t))
  if req and req < due then due = req end
  wanted[t] = true
  redis.call('HSET', dueKey, F_DUE .. t, due)
  if earliest == nil or due < earliest then earliest = due end
end
redis.call('HSET', dueKey, F_CARRIER, carrier)
local fields = redis.call('HKEYS', dueKey)
for _, f in ipairs(fields) do
  if string.sub(f, 1, #F_DUE) == F_DUE then
    local t = string.sub(f, #F_DUE + 1)
    if not wanted[t] then redis.call('HDEL', dueKey, f, F_REQ .. t) end
  end
end

local score = earliest
local current = redis.call('GET', claimKey)
if current then
  local expiry = liveClaimExpiry(claimKey, runningKey, current, now)
  if expiry then
    if expiry > score then score = expiry end
    -- The execution in flight was planned with the types polled before this upsert: its finish
    -- must not drop the dues set here as no longer polled (finish.lua).
    redis.call('HSET', dueKey, F_UPSERTED, '1')
  end
end
scoreInItsLane(prioKey, queueKey, cardId, score)
return 1
