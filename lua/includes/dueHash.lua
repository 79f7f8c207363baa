-- Due-hash helpers. Field names must match src/redis/dueFields.ts.
local F_DUE = 'due:'
local F_REQ = 'req:'
local F_OK = 'ok:'
local F_CFM = 'cfm:'
local F_EXP = 'exp:'
local F_PRIO = 'prio'
local F_CARRIER = 'carrier'
-- Gateway types the current claim deferred (comma-separated): the execution does not run them.
local F_DEFERRED = 'dfr'
-- Set by an upsert that lands while the card is claimed: the polled types changed under the
-- execution, so its plan's view of them is older than the hash. The owner's finish then keeps the
-- dues it would drop as no longer polled, and drops the mark (release too).
local F_UPSERTED = 'ups'
-- Score of a card with no due type at all: look again in an hour rather than never.
local NO_DUE_RETRY_MS = 3600000

-- Scores the card in the lane it is in: the priority lane if it is there, else the normal lane.
local function scoreInItsLane(prioKey, queueKey, cardId, score)
  if redis.call('ZSCORE', prioKey, cardId) then
    redis.call('ZADD', prioKey, score, cardId)
  else
    redis.call('ZADD', queueKey, score, cardId)
  end
end
