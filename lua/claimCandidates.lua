-- claimCandidates: the cards a claim round may touch, read before it so that claim.lua can declare
-- each card's keys in KEYS (Redis Cluster: a script touches only the keys it is given). Read-only.
--
-- Input:
--   KEYS[1] prio     ZSET priority lane
--   KEYS[2] queue    ZSET normal lane
--   KEYS[3] running  ZSET claim tokens in flight (score = lease expiry, ms)
--   ARGV[1] now ms ('' = Redis TIME)
--   ARGV[2] in-flight limit
--   ARGV[3] due horizon ms (>= 0)
--   ARGV[4] token prefix of the round
--   ARGV[5] '1' when the round is a retry (claim.lua ARGV[10])
--   ARGV[6] priority in-flight limit (claim.lua ARGV[13]; absent or '' = ARGV[2])
-- Output:
--   {cardId1, cardId2, …} without repeats: the cards of running tokens whose lease ended at or
--   before now (the round reclaims them), then, unless a retried round's prefix already holds
--   live claims (lease ending after now: it hands them back and claims nothing then), the first
--   capacity + SKIP_EXTRA cards due by now + horizon of each lane, capacity = limit − live claims
--   (the priority lane's with its own limit; the normal lane none when its capacity is 0).
--   A card that becomes due after this read, or lies beyond it, waits for the next round
--   (claim.lua leaves undeclared cards alone).
--   -2 when an argument is invalid
--@include now

local prioKey, queueKey, runningKey = KEYS[1], KEYS[2], KEYS[3]
local now = resolveNow(ARGV[1])
local limit = tonumber(ARGV[2])
local horizon = tonumber(ARGV[3])
local prefix = ARGV[4]
local prioLimit = limit
if ARGV[6] ~= nil and ARGV[6] ~= '' then prioLimit = tonumber(ARGV[6]) end
if now == nil or limit == nil or horizon == nil or horizon < 0 or prefix == nil or prefix == '' or prioLimit == nil or prioLimit < limit then return -2 end
-- Cards a round may skip beyond its capacity (claim.lua SKIP_EXTRA).
local SKIP_EXTRA = 100

local result, seen = {}, {}
local function add(cardId)
  if cardId and not seen[cardId] then
    seen[cardId] = true
    result[#result + 1] = cardId
  end
end

local stale = redis.call('ZRANGEBYSCORE', runningKey, '-inf', now)
for _, token in ipairs(stale) do add(string.match(token, ':([^:]+)$')) end

if ARGV[5] == '1' then
  -- The prefix holds live claims: the claim hands them back and claims nothing. Its expired ones
  -- do not count: claim.lua reclaims them first, and then claims as a new round.
  local cursor = '0'
  repeat
    local page = redis.call('ZSCAN', runningKey, cursor, 'MATCH', prefix .. '@*', 'COUNT', 500)
    for i = 2, #page[2], 2 do
      if tonumber(page[2][i]) > now then return result end
    end
    cursor = page[1]
  until cursor == '0'
end

local live = redis.call('ZCARD', runningKey) - #stale
local capacity = limit - live
local prioCapacity = math.max(capacity, prioLimit - live)
local dueBy = now + horizon
local function read(laneKey, cap)
  if cap <= 0 then return end
  for _, cardId in ipairs(redis.call('ZRANGEBYSCORE', laneKey, '-inf', dueBy, 'LIMIT', 0, cap + SKIP_EXTRA)) do add(cardId) end
end
read(prioKey, prioCapacity)
read(queueKey, capacity)
return result
