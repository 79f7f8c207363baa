-- claim: one dispatch round of a carrier account (docs/design.md, 'Lua scripts').
--
-- Reclaims expired leases, then claims due cards in lane order (priority up to its quota, normal,
-- priority again) within the in-flight capacity and the rate-limit groups' remaining budgets.
--
-- Input:
--   KEYS[1] prio     ZSET priority lane (score = earliest due, ms)
--   KEYS[2] queue    ZSET normal lane
--   KEYS[3] running  ZSET claim tokens in flight (score = lease expiry, ms)
--   KEYS[4 ..]       per card the round may touch, three keys: its due HASH, claim STRING and exec
--                    STRING (the cards claimCandidates.lua returned); ARGV[14 ..] names the cards
--   ARGV[1] now ms ('' = Redis TIME)
--   ARGV[2] lease ms (> 0)
--   ARGV[3] in-flight limit
--   ARGV[4] priority ratio (0 = unlimited, else share of capacity for the first priority pass)
--   ARGV[5] token prefix (unique per claimer and round); token = `<prefix>@<now>:<cardId>`: the
--           claim's instant (ms) travels in the token, so finish knows which request-checks were
--           made after the claim without a per-card write here (see finish.lua)
--   ARGV[6] remaining budget per group `g=n;g=n` ('' = no budget at all; absent group = unlimited)
--   ARGV[7] check type -> group `t=g;t=g` (types without a group are not budgeted)
--   ARGV[8] '1' when realname calls count against the budget (account has real-name control)
--   ARGV[9] gateway check types, comma-separated (the types that call the gateway)
--   ARGV[10] '1' when this is a retry of a round with the same token prefix: if that prefix
--            already holds claims (an earlier attempt landed), return those and claim nothing
--   ARGV[11] due horizon ms (>= 0, absent = 0): cards and types due at or before now + horizon
--            count as due this round (dispatch ahead by the engine's start lag, so runs start on time)
--   ARGV[12] check types the account polls under any card status, comma-separated (absent or '' =
--            not known: nothing is dropped). A budgeted round drops a `due:t` (with its `req:t`) of
--            a gateway type outside this list once it is STRAY_AGE_MS overdue: no run would call
--            the gateway for it, so it is neither counted against a group nor a reason to claim
--   ARGV[13] priority in-flight limit (>= ARGV[3]; '' = ARGV[3]): the priority lane may claim past
--            the in-flight limit up to it (the scheduler's adaptive limit must not hold a request back)
--   ARGV[14 ..] the card id of each KEYS triple, in order. Every key the round touches is declared:
--            a due card, or a card of an expired token, that is not among them waits for the next
--            round (an expired token of such a card is still dropped from `running`; its orphan
--            claim key is cleared when the card is next claimed)
-- Output:
--   {expired, cardId1, token1, fromPriority1 ('1'/'0'), cardId2, …}
--   (claims handed back to a retry report the lane that holds the card: '1' = priority lane)
--   expired = running tokens whose lease ended at or before now (reclaimed this round)
--   -2 when an argument is invalid
-- Writes per claimed card (when its due hash exists): `dfr` = the due gateway types the execution
-- must NOT run (comma-separated; set only when there are some, else absent — a stale one, left by
-- a claim that ended without finish or release, is dropped; finish and release drop it), `prio`
-- dropped when taken from the priority lane with nothing deferred. A card claimed from the normal
-- lane with nothing deferred costs no hash write at all.
--
-- Time: leases are judged against ARGV now and the running scores, never against Redis' real
-- TTL (see includes/lease.lua). A claimer whose clock runs ahead by s ms reclaims leases s ms
-- early, so clock skew between processes must stay well below the lease (or pass '' for TIME).
--
-- Budget per type, order per group: an already-claimed card is pushed back by its remaining lease
-- before the budget check (it needs no calls now). A candidate's due gateway types are grouped; a
-- group admits them if it is open and has room (or has given nothing yet this round: a group with
-- budget > 0 admits its first card even above budget). A group that refuses a card (budget <= 0,
-- or over budget after giving) is CLOSED for the rest of the round, so no later card goes ahead of
-- this one in that group. The card is claimed for the admitted types and its unbudgeted ones; the
-- types of closed groups are deferred (`dfr`; their due:t stays). A card whose due types are all in
-- closed groups is skipped: it keeps its score and the round goes on with later cards. The round
-- ends at capacity, when every budgeted group is closed, or after capacity + 100 skipped cards.
--
-- Stray dues (ARGV[12]): a due left for a type the account polls no more (a config change the
-- rebuild has not brought to the card yet) is dropped only once it is STRAY_AGE_MS overdue. A due
-- an upsert writes is never earlier than that upsert (new types are jittered from now), so a
-- caller whose list is a few seconds old (cached configs) never drops the due of a type a
-- rebuild just added. A card left with nothing due by the horizon is rescored to its earliest due
-- instead of being claimed. Per-status removals are the finish's (finish.lua: the execution's plan).
--@include now
--@include lease
--@include dueHash

local prioKey, queueKey, runningKey = KEYS[1], KEYS[2], KEYS[3]
local now = resolveNow(ARGV[1])
local lease = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local ratio = tonumber(ARGV[4])
local prefix = ARGV[5]
if now == nil or lease == nil or lease <= 0 or limit == nil or ratio == nil or ratio < 0 or prefix == '' then
  return -2
end
local budgeted = ARGV[6] ~= ''
local horizon = tonumber(ARGV[11] or '0')
if horizon == nil or horizon < 0 then return -2 end
-- Due means "due by the time a run claimed now starts". Leases are still judged against now.
local dueBy = now + horizon
-- Cards a round may leave due (skip) beyond its capacity before it ends: bounds one round's work.
local SKIP_EXTRA = 100
local countRealname = ARGV[8] == '1'
-- See the header: how long past due a stray due must be before a round drops it.
local STRAY_AGE_MS = 60000
local prioLimit = limit
if ARGV[13] ~= nil and ARGV[13] ~= '' then prioLimit = tonumber(ARGV[13]) end
if prioLimit == nil or prioLimit < limit then return -2 end
local polledKnown = ARGV[12] ~= nil and ARGV[12] ~= ''
local polledType = {}
if polledKnown then
  for t in string.gmatch(ARGV[12], '[^,]+') do polledType[t] = true end
end

-- The declared keys of each card (KEYS[4 ..] with ARGV[14 ..]).
local CARD_ARGV = 14
local dueKeyOf, claimKeyOf, execKeyOf = {}, {}, {}
if (#KEYS - 3) % 3 ~= 0 or #ARGV - CARD_ARGV + 1 ~= (#KEYS - 3) / 3 then return -2 end
for i = CARD_ARGV, #ARGV do
  local k = 4 + (i - CARD_ARGV) * 3
  dueKeyOf[ARGV[i]] = KEYS[k]
  claimKeyOf[ARGV[i]] = KEYS[k + 1]
  execKeyOf[ARGV[i]] = KEYS[k + 2]
end

-- 1. Reclaim expired leases (crashed or timed-out executions).
local stale = redis.call('ZRANGEBYSCORE', runningKey, '-inf', now)
for _, token in ipairs(stale) do
  local cardId = string.match(token, ':([^:]+)$')
  if cardId and dueKeyOf[cardId] then clearClaim(claimKeyOf[cardId], execKeyOf[cardId], runningKey, token) end
end
if #stale > 0 then redis.call('ZREMRANGEBYSCORE', runningKey, '-inf', now) end
local result = {#stale}

-- 1b. A retried round: the first attempt's claims are live under this prefix; their cards left the
-- due range, so without this they would sit unexecuted until their lease ran out.
if ARGV[10] == '1' then
  local cursor = '0'
  repeat
    local page = redis.call('ZSCAN', runningKey, cursor, 'MATCH', prefix .. '@*', 'COUNT', 500)
    cursor = page[1]
    for i = 1, #page[2], 2 do
      local token = page[2][i]
      local cardId = string.match(token, ':([^:]+)$')
      table.insert(result, cardId)
      table.insert(result, token)
      -- A claimed card stays in the lane it was taken from until its finish or release (claim
      -- rescores it there; requestCheck and upsert do not move a claimed card), so the lane says
      -- whether it came from the priority lane.
      table.insert(result, redis.call('ZSCORE', prioKey, cardId) and '1' or '0')
    end
  until cursor == '0'
  if #result > 1 then return result end
end

-- 2. Capacity: the normal lane's, and the priority lane's (at least as large; its extra room serves
-- priority cards only).
local inFlight = redis.call('ZCARD', runningKey)
local capacity = math.max(0, limit - inFlight)
local prioCapacity = math.max(capacity, prioLimit - inFlight)
if prioCapacity <= 0 then return result end

local budget = {}
for g, n in string.gmatch(ARGV[6], '([^=;]+)=(%-?[%d%.]+)') do budget[g] = tonumber(n) end
local typeGroup = {}
for t, g in string.gmatch(ARGV[7], '([^=;]+)=([^;]+)') do typeGroup[t] = g end
local gatewayTypes = {}
for t in string.gmatch(ARGV[9], '[^,]+') do table.insert(gatewayTypes, t) end

-- Per-type budget (only when the round is budgeted). Every gateway type is read; a type counts
-- against a group when it is counted (realname only with real-name control), has a group, and the
-- group has a budget. Other due gateway types are unbudgeted: they never wait for a group.
-- Groups are numbered 1..nGroups for the round, so the per-card bookkeeping runs over small
-- arrays (numeric loops, nothing to empty or allocate per card).
local readFields = {}
local nTypes = #gatewayTypes
-- Read with the due times: whether a stale `dfr` must be dropped.
local DFR_AT = nTypes + 1
local groupOfType = {} -- type index -> group number (budgeted types only)
local groupBudget, groupUsed, groupClosed = {}, {}, {}
local nGroups = 0
local open = 0
if budgeted then
  local numberOf = {}
  for i, t in ipairs(gatewayTypes) do
    readFields[i] = F_DUE .. t
    local g = typeGroup[t]
    if g and budget[g] ~= nil and (t ~= 'realname' or countRealname) then
      local gi = numberOf[g]
      if gi == nil then
        nGroups = nGroups + 1
        gi = nGroups
        numberOf[g] = gi
        groupBudget[gi] = budget[g]
        groupUsed[gi] = 0
        -- An exhausted group refuses every card: closed from the start.
        groupClosed[gi] = budget[g] <= 0
        if not groupClosed[gi] then open = open + 1 end
      end
      groupOfType[i] = gi
    end
  end
  readFields[DFR_AT] = F_DEFERRED
end
local anyBudgetedType = nGroups > 0

local taken = 0
local skipped = 0
local stop = false
-- A round examines at most this many cards that it leaves due (all their types deferred): it
-- keeps one round's Lua time bounded when the lane head is full of cards only closed groups serve.
local skipLimit = prioCapacity + SKIP_EXTRA

local CLAIMED, HANDLED, SKIPPED = 1, 2, 3
-- Arguments every claim of the round repeats, formatted once (as Redis formats a Lua number).
local nowArg = string.format('%.17g', now)
local leaseEndArg = string.format('%.17g', now + lease)
local pxArg = string.format('%.17g', lease + PX_MARGIN_MS)
local tokenPrefix = prefix .. '@' .. nowArg .. ':'

-- True when another token holds a live claim on the card: it is pushed to its lease end (it needs
-- no calls now, so it takes no budget and closes no group). An orphan claim (no live running
-- entry) is freed so the card is not stuck (I4).
local function heldElsewhere(claimKey, laneKey, cardId)
  local current = redis.call('GET', claimKey)
  if not current then return false end
  local expiry = tonumber(redis.call('ZSCORE', runningKey, current))
  if expiry and expiry > now then
    -- Past the due range, so the round does not meet it again (the lease end, or just beyond the horizon).
    redis.call('ZADD', laneKey, 'XX', math.max(expiry, dueBy + 1), cardId)
    return true
  end
  clearClaim(claimKey, execKeyOf[cardId], runningKey, current)
  return false
end

-- Per-card scratch, indexed by group number and overwritten for each candidate: allocation is what
-- a script pays for most (Redis runs a Lua GC step every 50 script calls, so garbage of one round
-- slows the next calls). verdict: 0 = nothing needed (or the group is closed), ADMIT, REFUSE.
local need, verdict = {}, {}
local ADMIT, REFUSE = 1, 2

-- A group refusing a card closes for the rest of the round.
local function closeRefusing()
  for gi = 1, nGroups do
    if verdict[gi] == REFUSE then
      groupClosed[gi] = true
      open = open - 1
    end
  end
end

local function clear(t)
  for k in pairs(t) do t[k] = nil end
end

-- Claimed cards' new lane scores and running entries, written by one ZADD each per batch rather
-- than two calls per card (a redis.call costs more than the Lua around it). Flushed before the
-- lane is read again (claimed cards must have left its due range), and every FLUSH_AT values so
-- unpack stays far below Lua's stack limit.
local FLUSH_AT = 1000
local pendingLane, pendingRunning = {}, {}
local function flushClaimed(laneKey)
  if #pendingLane == 0 then return end
  redis.call('ZADD', laneKey, 'XX', unpack(pendingLane))
  redis.call('ZADD', runningKey, unpack(pendingRunning))
  clear(pendingLane)
  clear(pendingRunning)
end

-- CLAIMED, HANDLED (pushed past now: leaves the due range) or SKIPPED (stays due at its score).
-- The budget is decided first from the due times alone and committed only once the card is known
-- to be free, so the usual claim costs one SET NX and no GET.
local function tryClaim(cardId, fromPriority, laneKey)
  local claimKey, dueKey = claimKeyOf[cardId], dueKeyOf[cardId]
  local deferred = ''
  local budgetedCard = false
  -- Whether the hash may hold a `dfr` to drop: unknown (so assumed) unless the round read it.
  local staleDeferred = true
  if anyBudgetedType then
    budgetedCard = true
    local values = redis.call('HMGET', dueKey, unpack(readFields))
    staleDeferred = values[DFR_AT] and values[DFR_AT] ~= ''
    for gi = 1, nGroups do need[gi] = 0 end
    local unbudgeted = false
    local dropped = false
    for i = 1, nTypes do
      local v = values[i]
      if v then
        local d = tonumber(v)
        if d and polledKnown and not polledType[gatewayTypes[i]] and d <= now - STRAY_AGE_MS then
          -- A stray: not polled by the account any more (see the header).
          redis.call('HDEL', dueKey, readFields[i], F_REQ .. gatewayTypes[i])
          values[i] = false
          dropped = true
        elseif d and d <= dueBy then
          local gi = groupOfType[i]
          if gi then need[gi] = need[gi] + 1 else unbudgeted = true end
        end
      end
    end
    if dropped and not unbudgeted then
      local anyNeed = false
      for gi = 1, nGroups do
        if need[gi] > 0 then anyNeed = true end
      end
      if not anyNeed then
        -- Only strays brought it here: due again at its earliest remaining due, unless that is now.
        local earliest = nil
        local fields = redis.call('HGETALL', dueKey)
        for k = 1, #fields, 2 do
          if string.sub(fields[k], 1, #F_DUE) == F_DUE then
            local d = tonumber(fields[k + 1])
            if d and (earliest == nil or d < earliest) then earliest = d end
          end
        end
        if earliest == nil or earliest > dueBy then
          if heldElsewhere(claimKey, laneKey, cardId) then return HANDLED end
          redis.call('ZADD', laneKey, 'XX', earliest or (now + NO_DUE_RETRY_MS), cardId)
          return HANDLED
        end
      end
    end
    -- Per group: admit it, or defer its types. A group refusing a card closes for the round, so no
    -- later card goes ahead of this one in that group. A group with budget > 0 admits its first
    -- card even above budget (limiter wait mode).
    local any, anyAdmitted = false, unbudgeted
    for gi = 1, nGroups do
      local n = need[gi]
      local v = 0
      if n > 0 then
        any = true
        if not groupClosed[gi] then
          local u = groupUsed[gi]
          if u > 0 and u + n > groupBudget[gi] then
            v = REFUSE
          else
            v = ADMIT
            anyAdmitted = true
          end
        end
      end
      verdict[gi] = v
    end
    if any and not anyAdmitted then
      -- Everything it needs now waits for a closed group: it stays due, in place.
      if heldElsewhere(claimKey, laneKey, cardId) then return HANDLED end
      closeRefusing()
      if open <= 0 then stop = true end
      return SKIPPED
    end
    if any then
      for i = 1, nTypes do
        local gi = groupOfType[i]
        if gi and need[gi] > 0 and verdict[gi] ~= ADMIT then
          local d = tonumber(values[i])
          if d and d <= dueBy then
            deferred = deferred == '' and gatewayTypes[i] or (deferred .. ',' .. gatewayTypes[i])
          end
        end
      end
    end
  end
  local token = tokenPrefix .. cardId
  if not redis.call('SET', claimKey, token, 'NX', 'PX', pxArg) then
    if heldElsewhere(claimKey, laneKey, cardId) then return HANDLED end
    redis.call('SET', claimKey, token, 'PX', pxArg)
  end
  if budgetedCard then
    closeRefusing()
    for gi = 1, nGroups do
      if verdict[gi] == ADMIT then groupUsed[gi] = groupUsed[gi] + need[gi] end
    end
    if deferred ~= '' and open <= 0 then stop = true end
  end
  -- The lane and running writes of claimed cards go out in batches (flushClaimed).
  local n = #pendingLane
  pendingLane[n + 1] = leaseEndArg
  pendingLane[n + 2] = cardId
  pendingRunning[n + 1] = leaseEndArg
  pendingRunning[n + 2] = token
  if n + 2 >= FLUSH_AT then flushClaimed(laneKey) end
  if deferred ~= '' then
    -- Deferred types are due types read from the hash, so it exists. A card with a deferred type
    -- keeps its priority: finish puts it back in the priority lane.
    redis.call('HSET', dueKey, F_DEFERRED, deferred)
  elseif fromPriority then
    redis.call('HDEL', dueKey, F_PRIO, F_DEFERRED)
  elseif staleDeferred then
    redis.call('HDEL', dueKey, F_DEFERRED)
  end
  taken = taken + 1
  local r = #result
  result[r + 1] = cardId
  result[r + 2] = token
  result[r + 3] = fromPriority and '1' or '0'
  return CLAIMED
end

-- Handled candidates leave the due range (claimed or pushed past now); skipped ones stay in it, in
-- front of the cards not yet looked at, so each lane is read from its count of skipped cards on.
local skippedIn = {}
local function drain(laneKey, fromPriority, quota, cap)
  local offset = skippedIn[laneKey] or 0
  while quota > 0 and not stop and taken < cap do
    local ids = redis.call('ZRANGEBYSCORE', laneKey, '-inf', dueBy, 'LIMIT', offset, quota)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do
      if stop or quota <= 0 or taken >= cap then break end
      -- Not declared (due after the candidates were read): left for the next round, in place,
      -- and counted as a skip so that a round never reads on through a lane of such cards.
      local outcome = dueKeyOf[id] and tryClaim(id, fromPriority, laneKey) or SKIPPED
      if outcome == CLAIMED then
        quota = quota - 1
      elseif outcome == SKIPPED then
        offset = offset + 1
        skipped = skipped + 1
        if skipped >= skipLimit then stop = true end
      end
    end
    flushClaimed(laneKey)
  end
  skippedIn[laneKey] = offset
end

-- 3. Lane order: priority up to its quota of the normal capacity, normal up to that capacity, then
-- priority again up to its own capacity (the rest of the normal one plus the extra room).
local priorityQuota = capacity
if ratio > 0 and capacity > 0 then
  priorityQuota = math.floor(capacity * ratio)
  if priorityQuota < 1 then priorityQuota = 1 end
  if priorityQuota > capacity then priorityQuota = capacity end
end
drain(prioKey, true, priorityQuota, capacity)
drain(queueKey, false, capacity - taken, capacity)
drain(prioKey, true, prioCapacity - taken, prioCapacity)
return result
