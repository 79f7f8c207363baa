-- renew: extend the lease of an executing card (docs/design.md, 'Lua scripts').
--
-- Input:
--   KEYS[1] claim    STRING claim token
--   KEYS[2] exec     STRING execution right `<token>|<executorId>`
--   KEYS[3] running  ZSET lease expiry per token
--   KEYS[4] prio     ZSET priority lane
--   KEYS[5] queue    ZSET normal lane
--   ARGV[1] token
--   ARGV[2] executor id
--   ARGV[3] lease ms (> 0): new expiry = now + lease
--   ARGV[4] now ms ('' = Redis TIME)
--   ARGV[5] card id
-- Output:
--    1 renewed: running expiry and the card's score (in whichever lane) = now + lease
--    0 the token no longer owns a live claim or the exec right is not this executor's:
--      the caller must stop before its next gateway call
--   -2 invalid argument
--@include now
--@include lease

local claimKey, execKey, runningKey, prioKey, queueKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, value, cardId = ARGV[1], ARGV[2], ARGV[5]
local lease = tonumber(ARGV[3])
local now = resolveNow(ARGV[4])
if lease == nil or lease <= 0 or now == nil or token == '' then return -2 end

if liveClaimExpiry(claimKey, runningKey, token, now) == nil then return 0 end
if redis.call('GET', execKey) ~= execRecord(token, value) then return 0 end
redis.call('PEXPIRE', claimKey, lease + PX_MARGIN_MS)
redis.call('PEXPIRE', execKey, lease + PX_MARGIN_MS)
redis.call('ZADD', runningKey, 'XX', now + lease, token)
redis.call('ZADD', prioKey, 'XX', now + lease, cardId)
redis.call('ZADD', queueKey, 'XX', now + lease, cardId)
return 1
