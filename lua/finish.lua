-- finish: write an execution's business result and hand the card back to its lane
-- (docs/design.md, 'Lua scripts').
--
-- Input:
--   KEYS[1] due      HASH card state
--   KEYS[2] running  ZSET lease expiry per token
--   KEYS[3] prio     ZSET priority lane
--   KEYS[4] queue    ZSET normal lane
--   KEYS[5] claim    STRING the card's claim token
--   KEYS[6] exec     STRING the card's execution right
--   KEYS[7] fin      STRING the card's last recorded finish `<token>|<reply>|<record>`
--   ARGV[1] token
--   ARGV[2] card id
--   ARGV[3] now ms ('' = Redis TIME)
--   ARGV[4] '1' = the caller lost its lease (a renew failed): finish as a stale token even when
--           the claim still names it, so nothing is released or rescored; else ''
--   ARGV[5] result record: the caller's result, opaque here ('' = none: nothing stored or replayed);
--           kept RECORD_TTL_MS (1 h: far beyond any retry of the finishing activity)
--   ARGV[6] n = number of field/value pairs to set
--   ARGV[7 .. 6+2n] field, value pairs to set in the due hash
--   ARGV[7+2n ..] fields to delete from the due hash
-- Output:
--    1 the token owned a live claim: claim, exec right and running entry released, `dfr` and `ups`
--      dropped; the card (if still polled) is scored by its earliest due:* (now + 1 h when none),
--      in the priority lane when prio = 1, else in the normal lane
--    0 the token no longer owns the claim, or ARGV[4] = '1' (result written as described below,
--      nothing released)
--   {1|0, record} replay: a finish by this token with a record already landed; nothing applied,
--      the first call's reply and record are returned
--   -2 invalid argument
--
-- At most once per token: a finish with a record stores `<token>|<reply>|<record>` in `<card>fin`
-- (PX = RECORD_TTL_MS) together with its writes, and a later finish by the same token with a record
-- (a retried activity that recomputed its result from the already updated hash) gets that back
-- instead of counting a failure twice. One key per card: a newer token's finish replaces it.
--
-- Fixes over the seed's finish (the Go service this project was derived from; its scripts are
-- kept in bench/lua/seed/ as a baseline):
--  * a card in no lane (or without a due hash) was removed from polling: the result is not
--    written, so a stale hash is never recreated, and the card is not re-added;
--  * a request-check made after the claim (req:t >= the claim's instant, which its token carries:
--    `<prefix>@<ms>:<cardId>`, see claim.lua; a tie counts as after, since re-running is safe and
--    losing is not) is never lost: due:t is kept <= req:t, and the request's cfm:t/exp:t win over
--    this execution's. Requests before the claim were served by this execution and their req:t is
--    dropped. A token without the instant (claim.lua always writes it) counts every request as made
--    after the claim;
--  * a stale finish (token lost its claim) still records what the gateway said, but never moves
--    a due:t later than it is, nor touches cfm:t/exp:t: the current owner decides those.
--  * types the claim deferred (`dfr`, see claim.lua) did not run: an owning finish treats them
--    like a stale one (due:t never later, cfm/exp untouched) and keeps their req:t, so they stay
--    due and the card is rescored to its earliest due (claimable again next round).
--  * the due:t fields are the types the card is polled for (upsert writes them): a finish never
--    creates one (a type removed while the run was in flight stays removed, whatever the token).
--    Deleting due:t says the type is not polled any more (the execution's plan, newer than the
--    hash unless an upsert landed during the claim): an owning finish without `ups` drops due:t
--    and req:t; a stale finish, one with `ups` (see upsert.lua), or a type whose request stays
--    pending (made after the claim, or deferred) keeps both.
--@include now
--@include lease
--@include dueHash

local dueKey, runningKey, prioKey, queueKey, claimKey, execKey, finKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local token, cardId = ARGV[1], ARGV[2]
local now = resolveNow(ARGV[3])
local leaseLost = ARGV[4] == '1'
local record = ARGV[5]
local nSet = tonumber(ARGV[6])
if now == nil or token == '' or nSet == nil or nSet < 0 or 6 + 2 * nSet > #ARGV then return -2 end
local RECORD_TTL_MS = 3600000

if record ~= '' then
  local previous = redis.call('GET', finKey)
  local mine = token .. '|'
  if previous and string.sub(previous, 1, #mine) == mine then
    return {tonumber(string.sub(previous, #mine + 1, #mine + 1)), string.sub(previous, #mine + 3)}
  end
end
-- Every reply below is final for this token: stored with the record, so a retry replays it.
local function reply(code)
  if record ~= '' then redis.call('SET', finKey, token .. '|' .. code .. '|' .. record, 'PX', RECORD_TTL_MS) end
  return code
end

local owned = not leaseLost and leaseExpiry(runningKey, token, now) ~= nil
-- The hash is read once and what changes is written back in one HSET and one HDEL, so the cost
-- hardly grows with the fields and types a result touches.
local raw = redis.call('HGETALL', dueKey)
-- Allocation is what costs here (Redis runs a Lua GC step every 50 script calls): no tables, few
-- closures, no temporary strings on the common path.
local COLON = 58 -- every typed prefix (`due:`, `cfm:`, `exp:`, `req:`) is four characters
local nArgs = #ARGV
local delFrom = 7 + 2 * nSet

-- The usual finish: its token owns the claim, nothing was deferred, no request is pending, so no
-- type is protected and the result applies as it is: written straight from ARGV, the next score
-- read off the HGETALL reply in the same pass that rules the other cases out.
local usual = owned and #raw > 0
local score, prio = nil, nil
-- The usual finish only updates dues that exist: the result's due fields, counted here and matched
-- against the hash below (a finish never creates a due:t).
local setDues, setDuesFound = 0, 0
if usual then
  for j = 7, delFrom - 2, 2 do
    if string.sub(ARGV[j], 1, 4) == F_DUE then setDues = setDues + 1 end
  end
end
-- Whether the usual finish has anything to delete: a claim mark, or one of the result's deletions
-- that exists (in the hash, or set by the result itself). Usually none: no HDEL call at all.
local anyDel = false
if usual then
  for i = 1, #raw, 2 do
    local f = raw[i]
    local b1, b2, b3, b4 = string.byte(f, 1, 4)
    if b4 == COLON then
      if b1 == 100 and b2 == 117 and b3 == 101 then -- 'due:'; a due the result sets is counted below
        local touched = false
        for j = 7, nArgs do
          if ARGV[j] == f and (j >= delFrom or (j - 7) % 2 == 0) then
            touched = true
            if j < delFrom then setDuesFound = setDuesFound + 1 end
          end
        end
        if not touched then
          local d = tonumber(raw[i + 1])
          if d and (score == nil or d < score) then score = d end
        end
      elseif b1 == 114 and b2 == 101 and b3 == 113 then -- 'req:'
        usual = false
        break
      end
    elseif f == F_DEFERRED then
      if raw[i + 1] ~= '' then
        usual = false
        break
      end
      anyDel = true
    elseif f == F_PRIO then
      prio = raw[i + 1]
    elseif f == F_UPSERTED then
      usual = false
      break
    end
  end
  -- A due the result sets for a type the hash no longer has: not written (below).
  if setDuesFound < setDues then usual = false end
end
if usual and not anyDel then
  for j = delFrom, nArgs do
    local f = ARGV[j]
    for k = 7, delFrom - 2, 2 do
      if ARGV[k] == f then
        anyDel = true
        break
      end
    end
    if not anyDel then
      for i = 1, #raw, 2 do
        if raw[i] == f then
          anyDel = true
          break
        end
      end
    end
    if anyDel then break end
  end
end

if usual then
  -- The result's dues and `prio`. Deletions apply after sets (HSET then HDEL below), and of a field
  -- set twice the last value wins, as in HSET.
  for j = 7, delFrom - 2, 2 do
    local f = ARGV[j]
    local b1, b2, b3, b4 = string.byte(f, 1, 4)
    local isDue = b4 == COLON and b1 == 100 and b2 == 117 and b3 == 101
    if isDue or f == F_PRIO then
      local final = true
      for k = j + 2, nArgs do
        if ARGV[k] == f and (k >= delFrom or (k - 7) % 2 == 0) then
          final = false
          break
        end
      end
      if final then
        if isDue then
          local d = tonumber(ARGV[j + 1])
          if d and (score == nil or d < score) then score = d end
        else
          prio = ARGV[j + 1]
        end
      end
    end
  end
  for j = delFrom, nArgs do
    if ARGV[j] == F_PRIO then prio = nil end
  end
  score = score or (now + NO_DUE_RETRY_MS)
  local lane, other = queueKey, prioKey
  if prio == '1' then lane, other = prioKey, queueKey end
  -- Rescored where it is: ZADD XX CH answers 1 when the card is in that lane (its score, the lease
  -- end, changes), so the usual finish looks no lane up first.
  local inLane = redis.call('ZADD', lane, 'XX', 'CH', score, cardId) == 1
  if not inLane then
    if redis.call('ZSCORE', lane, cardId) then
      inLane = true -- already at that score
    elseif redis.call('ZREM', other, cardId) == 1 then
      redis.call('ZADD', lane, score, cardId) -- `prio` set or cleared: it changes lanes
      inLane = true
    end
  end
  if inLane then
    if nSet > 0 then redis.call('HSET', dueKey, unpack(ARGV, 7, delFrom - 1)) end
    -- The claim's marks and the result's deletions in one call (an absent field is a no-op).
    if anyDel then redis.call('HDEL', dueKey, F_DEFERRED, unpack(ARGV, delFrom, nArgs)) end
    -- This token owns the claim (checked above), so the claim key is its own; the exec key holds
    -- at most its right (an earlier token's right ends with that token's claim).
    redis.call('DEL', claimKey, execKey)
    redis.call('ZREM', runningKey, token)
    return reply(1)
  end
  -- In no lane: removed from polling during the execution, handled below.
end

-- Normal lane first: where most cards are (a card is in at most one lane, I1).
local inQueue = redis.call('ZSCORE', queueKey, cardId)
local inPrio = not inQueue and redis.call('ZSCORE', prioKey, cardId)
if not (inQueue or inPrio) or #raw == 0 then
  -- A lane entry without state cannot be executed: drop it rather than poll it forever.
  if #raw == 0 then
    redis.call('ZREM', prioKey, cardId)
    redis.call('ZREM', queueKey, cardId)
  end
  if owned then
    clearClaim(claimKey, execKey, runningKey, token)
    return reply(1)
  end
  return reply(0)
end

-- Every other finish: a stale token, deferred types or a pending request protect some types.
local score = nil
local isPrio
do
  local hash = {}
  local hasReq = false
  for i = 1, #raw, 2 do
    local f = raw[i]
    hash[f] = raw[i + 1]
    if not hasReq then
      local b1, b2, b3, b4 = string.byte(f, 1, 4)
      hasReq = b1 == 114 and b2 == 101 and b3 == 113 and b4 == COLON -- 'req:'
    end
  end
  local claimedAt = tonumber(string.match(token, '@([%d%.]+):[^:]*$')) or -1
  -- Types the claim deferred were not run by this execution (claim.lua): treated as for a stale token.
  local deferred = nil
  if owned and hash[F_DEFERRED] and hash[F_DEFERRED] ~= '' then
    deferred = {}
    for t in string.gmatch(hash[F_DEFERRED], '[^,]+') do deferred[t] = true end
  end
  -- Whether the execution's plan may say that `t` is no longer polled (see the header): not when
  -- an upsert landed during the claim, nor while a request for `t` stays pending (made after the
  -- claim: whoever made it saw `t` polled later than the plan did; or deferred, so not served).
  local mayDrop = owned and hash[F_UPSERTED] == nil
  local function droppable(t)
    if not mayDrop then return false end
    local req = tonumber(hash[F_REQ .. t])
    return not (req and (req >= claimedAt or (deferred ~= nil and deferred[t])))
  end
  local sets, dels = {}, {}
  -- Value before this finish of each field it touches (false = absent).
  local orig = {}
  -- Per type looked at: false = not protected; true = protected without a floor; a number = the floor
  -- its due:t may not exceed.
  local prot = {}
  local function protect(t)
    local known = prot[t]
    if known ~= nil then return known ~= false end
    local req = tonumber(hash[F_REQ .. t])
    local isDeferred = deferred ~= nil and deferred[t] == true
    local floor = nil
    if owned and not isDeferred then
      if req and req >= claimedAt then floor = req end
    else
      floor = tonumber(hash[F_DUE .. t])
      if req and (floor == nil or req < floor) then floor = req end
    end
    if floor ~= nil then prot[t] = floor else prot[t] = (not owned) or isDeferred end
    return prot[t] ~= false
  end

  local function remember(field)
    if orig[field] == nil then orig[field] = hash[field] or false end
  end
  -- Applies one field of the result (value nil = delete) unless it is protected.
  local function apply(field, value)
    if string.byte(field, 4) == COLON then
      local prefix = string.sub(field, 1, 4)
      if prefix == F_DUE then
        local t = string.sub(field, 5)
        if value == nil then
          -- Not polled any more: dropped with its request, no floor brings it back.
          if not droppable(t) then return end
          prot[t] = false
          remember(F_REQ .. t)
          hash[F_REQ .. t] = nil
        elseif hash[field] == nil then
          -- Never created: the type is not polled (any more).
          return
        else
          -- The due of a protected type is written and clamped below.
          protect(t)
        end
      elseif prefix == F_REQ and value == nil and not droppable(string.sub(field, 5)) then
        return
      elseif (prefix == F_CFM or prefix == F_EXP) and protect(string.sub(field, 5)) then
        -- Its confirmation is not ours.
        return
      end
    end
    remember(field)
    hash[field] = value
  end

  local idx = 7
  for _ = 1, nSet do
    apply(ARGV[idx], ARGV[idx + 1])
    idx = idx + 2
  end
  while idx <= nArgs do
    apply(ARGV[idx], nil)
    idx = idx + 1
  end
  -- Requests after the claim also cover types this result did not mention. The same pass finds the
  -- earliest due (the floors below only lower dues, so they join the minimum afterwards).
  if owned then
    for f, v in pairs(hash) do
      if string.byte(f, 4) == COLON then
        local prefix = string.sub(f, 1, 4)
        if prefix == F_DUE then
          local d = tonumber(v)
          if d and (score == nil or d < score) then score = d end
        elseif prefix == F_REQ then
          local t = string.sub(f, 5)
          local req = tonumber(v)
          if (req and req >= claimedAt) or (deferred ~= nil and deferred[t]) then
            protect(t)
          else
            -- Served by this execution (requested before the claim).
            if orig[f] == nil then orig[f] = v end
            hash[f] = nil
          end
        end
      end
    end
  end
  for t, floor in pairs(prot) do
    local field = F_DUE .. t
    local due = tonumber(hash[field])
    -- Only an existing due is clamped: a floor never creates one.
    if type(floor) == 'number' and due ~= nil then
      if due > floor then
        remember(field)
        hash[field] = floor
      end
      if score == nil or floor < score then score = floor end
    end
  end
  if owned then
    if hash[F_DEFERRED] ~= nil then
      if orig[F_DEFERRED] == nil then orig[F_DEFERRED] = hash[F_DEFERRED] end
      hash[F_DEFERRED] = nil
    end
    if hash[F_UPSERTED] ~= nil then
      remember(F_UPSERTED)
      hash[F_UPSERTED] = nil
    end
  end

  -- What changed is written back below.
  for f, old in pairs(orig) do
    local v = hash[f]
    if v == nil then
      if old then dels[#dels + 1] = f end
    elseif v ~= old then
      sets[#sets + 1] = f
      sets[#sets + 1] = v
    end
  end
  if #sets > 0 then redis.call('HSET', dueKey, unpack(sets)) end
  if #dels > 0 then redis.call('HDEL', dueKey, unpack(dels)) end
  if not owned then return reply(0) end
  isPrio = hash[F_PRIO] == '1'
end

-- This token owns the claim (checked above), so the claim key is its own; the exec key holds at
-- most its right.
redis.call('DEL', claimKey, execKey)
redis.call('ZREM', runningKey, token)
score = score or (now + NO_DUE_RETRY_MS)
if isPrio then
  if inQueue then redis.call('ZREM', queueKey, cardId) end
  redis.call('ZADD', prioKey, score, cardId)
else
  if inPrio then redis.call('ZREM', prioKey, cardId) end
  redis.call('ZADD', queueKey, score, cardId)
end
return reply(1)
