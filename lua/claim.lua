-- claim: one dispatch round of a carrier account (DESIGN §4.1).
--
-- Reclaims expired leases, then claims due cards in lane order (priority up to its quota, normal,
-- priority again) within the in-flight capacity and the rate-limit groups' remaining budgets.
--
-- Input:
--   KEYS[1] prio     ZSET priority lane (score = earliest due, ms)
--   KEYS[2] queue    ZSET normal lane
--   KEYS[3] running  ZSET claim tokens in flight (score = lease expiry, ms)
--   KEYS[4] base     key prefix of the account (`…poll:{c<id>}:`); not a key itself, declared so
--                    the cluster slot check covers it; card keys are `<base>card:<id>:due|claim|exec`
--   ARGV[1] now ms ('' = Redis TIME)
--   ARGV[2] lease ms (> 0)
--   ARGV[3] in-flight limit
--   ARGV[4] priority ratio (0 = unlimited, else share of capacity for the first priority pass)
--   ARGV[5] token prefix (unique per claimer and round); token = `<prefix>:<cardId>`
--   ARGV[6] remaining budget per group `g=n;g=n` ('' = no budget at all; absent group = unlimited)
--   ARGV[7] check type -> group `t=g;t=g` (types without a group are not budgeted)
--   ARGV[8] '1' when realname calls count against the budget (account has real-name control)
--   ARGV[9] gateway check types, comma-separated (the types that call the gateway)
--   ARGV[10] '1' when this is a retry of a round with the same token prefix: if that prefix
--            already holds claims (an earlier attempt landed), return those and claim nothing
-- Output:
--   {expired, cardId1, token1, fromPriority1 ('1'/'0'), cardId2, …}
--   (claims handed back to a retry report fromPriority '0': the lane is not recorded)
--   expired = running tokens whose lease ended at or before now (reclaimed this round)
--   -2 when an argument is invalid
--
-- Time: leases are judged against ARGV now and the running scores, never against Redis' real
-- TTL (see includes/lease.lua). A claimer whose clock runs ahead by s ms reclaims leases s ms
-- early, so clock skew between processes must stay well below the lease (or pass '' for TIME).
--
-- Order within a round: an already-claimed card is pushed back by its remaining lease before the
-- budget check (it needs no calls now, so it never stops the round); the first card that would
-- exceed a group's budget stops the whole round (no skipping ahead).
--@include now
--@include lease
--@include dueHash

local prioKey, queueKey, runningKey, base = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = resolveNow(ARGV[1])
local lease = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local ratio = tonumber(ARGV[4])
local prefix = ARGV[5]
if now == nil or lease == nil or lease <= 0 or limit == nil or ratio == nil or ratio < 0 or prefix == '' then
  return -2
end
local budgeted = ARGV[6] ~= ''
local countRealname = ARGV[8] == '1'

local function cardKey(cardId, suffix)
  return base .. 'card:' .. cardId .. ':' .. suffix
end

-- 1. Reclaim expired leases (crashed or timed-out executions).
local stale = redis.call('ZRANGEBYSCORE', runningKey, '-inf', now)
for _, token in ipairs(stale) do
  local cardId = string.match(token, ':([^:]+)$')
  if cardId then clearClaim(cardKey(cardId, 'claim'), cardKey(cardId, 'exec'), runningKey, token) end
end
if #stale > 0 then redis.call('ZREMRANGEBYSCORE', runningKey, '-inf', now) end
local result = {#stale}

-- 1b. A retried round: the first attempt's claims are live under this prefix; their cards left the
-- due range, so without this they would sit unexecuted until their lease ran out.
if ARGV[10] == '1' then
  local cursor = '0'
  repeat
    local page = redis.call('ZSCAN', runningKey, cursor, 'MATCH', prefix .. ':*', 'COUNT', 500)
    cursor = page[1]
    for i = 1, #page[2], 2 do
      local token = page[2][i]
      table.insert(result, string.sub(token, #prefix + 2))
      table.insert(result, token)
      table.insert(result, '0')
    end
  until cursor == '0'
  if #result > 1 then return result end
end

-- 2. Capacity.
local capacity = limit - redis.call('ZCARD', runningKey)
if capacity <= 0 then return result end

local budget = {}
for g, n in string.gmatch(ARGV[6], '([^=;]+)=(%-?[%d%.]+)') do budget[g] = tonumber(n) end
local typeGroup = {}
for t, g in string.gmatch(ARGV[7], '([^=;]+)=([^;]+)') do typeGroup[t] = g end
local gatewayFields = {}
local gatewayTypes = {}
for t in string.gmatch(ARGV[9], '[^,]+') do
  if t ~= 'realname' or countRealname then
    table.insert(gatewayTypes, t)
    table.insert(gatewayFields, F_DUE .. t)
  end
end

local used = {}
local taken = 0
local stop = false

-- Calls per group the card needs now (types due at or before now).
local function callsNeeded(dueKey)
  local need = {}
  if not budgeted or #gatewayFields == 0 then return need end
  local dues = redis.call('HMGET', dueKey, unpack(gatewayFields))
  for i, t in ipairs(gatewayTypes) do
    local d = tonumber(dues[i])
    local g = typeGroup[t]
    if d and d <= now and g then need[g] = (need[g] or 0) + 1 end
  end
  return need
end

-- True when claimed. Sets `stop` when the card would exceed a group's budget.
local function tryClaim(cardId, fromPriority, laneKey)
  local claimKey, execKey, dueKey = cardKey(cardId, 'claim'), cardKey(cardId, 'exec'), cardKey(cardId, 'due')
  local current = redis.call('GET', claimKey)
  if current then
    local expiry = tonumber(redis.call('ZSCORE', runningKey, current))
    if expiry and expiry > now then
      -- Still executing: look again when its lease ends (now + remaining lease).
      redis.call('ZADD', laneKey, 'XX', expiry, cardId)
      return false
    end
    -- A claim without a live running entry is an orphan: free it so the card is not stuck (I4).
    clearClaim(claimKey, execKey, runningKey, current)
  end
  local need = callsNeeded(dueKey)
  for g, n in pairs(need) do
    local b = budget[g]
    local u = used[g] or 0
    -- A group with budget > 0 admits one card per round even above budget (limiter wait mode).
    if b ~= nil and (b <= 0 or (u > 0 and u + n > b)) then
      stop = true
      return false
    end
  end
  local token = prefix .. ':' .. cardId
  redis.call('SET', claimKey, token, 'PX', lease + PX_MARGIN_MS)
  for g, n in pairs(need) do used[g] = (used[g] or 0) + n end
  redis.call('ZADD', laneKey, 'XX', now + lease, cardId)
  redis.call('ZADD', runningKey, now + lease, token)
  if redis.call('EXISTS', dueKey) == 1 then
    if fromPriority then redis.call('HDEL', dueKey, F_PRIO) end
    -- Requests made after this instant survive finish (see finish.lua).
    redis.call('HSET', dueKey, F_CLAIMED_AT, now)
  end
  taken = taken + 1
  table.insert(result, cardId)
  table.insert(result, token)
  table.insert(result, fromPriority and '1' or '0')
  return true
end

-- Every candidate leaves the due range once handled (claimed or pushed past now), so re-reading
-- the head of the lane terminates.
local function drain(laneKey, fromPriority, quota)
  while quota > 0 and not stop and taken < capacity do
    local ids = redis.call('ZRANGEBYSCORE', laneKey, '-inf', now, 'LIMIT', 0, quota)
    if #ids == 0 then return end
    for _, id in ipairs(ids) do
      if stop or quota <= 0 or taken >= capacity then return end
      if tryClaim(id, fromPriority, laneKey) then quota = quota - 1 end
    end
  end
end

-- 3. Lane order.
local priorityQuota = capacity
if ratio > 0 then
  priorityQuota = math.floor(capacity * ratio)
  if priorityQuota < 1 then priorityQuota = 1 end
  if priorityQuota > capacity then priorityQuota = capacity end
end
drain(prioKey, true, priorityQuota)
drain(queueKey, false, capacity - taken)
drain(prioKey, true, capacity - taken)
return result
