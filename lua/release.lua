-- release: give a claim back when the card cannot be started or fails before finish (DESIGN §4.5).
--
-- Input:
--   KEYS[1] claim    STRING claim token
--   KEYS[2] exec     STRING execution right
--   KEYS[3] running  ZSET lease expiry per token
--   KEYS[4] prio     ZSET priority lane
--   KEYS[5] queue    ZSET normal lane
--   KEYS[6] due      HASH card state (its claim time is dropped)
--   ARGV[1] token
--   ARGV[2] card id
--   ARGV[3] now ms ('' = Redis TIME)
-- Output:
--    1 released: claim, exec right and running entry dropped, score = now in whichever lane
--    0 the token does not own a live claim (nothing changed; an expired lease is reclaimed and
--      counted by the next claim round)
--   -2 invalid argument
--@include now
--@include lease
--@include dueHash

local claimKey, execKey, runningKey, prioKey, queueKey, dueKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local token, cardId = ARGV[1], ARGV[2]
local now = resolveNow(ARGV[3])
if now == nil or token == '' then return -2 end

if liveClaimExpiry(claimKey, runningKey, token, now) == nil then return 0 end
clearClaim(claimKey, execKey, runningKey, token)
redis.call('HDEL', dueKey, F_CLAIMED_AT)
redis.call('ZADD', prioKey, 'XX', now, cardId)
redis.call('ZADD', queueKey, 'XX', now, cardId)
return 1
