-- release: give a claim back when the card cannot be started or fails before finish
-- (docs/design.md, 'Lua scripts').
--
-- Input:
--   KEYS[1] claim    STRING claim token
--   KEYS[2] exec     STRING execution right
--   KEYS[3] running  ZSET lease expiry per token
--   KEYS[4] prio     ZSET priority lane
--   KEYS[5] queue    ZSET normal lane
--   KEYS[6] due      HASH card state (its claim time, deferred types and upsert mark are dropped)
--   ARGV[1] token
--   ARGV[2] card id
--   ARGV[3] now ms ('' = Redis TIME)
--   ARGV[4] retry after ms ('' or 0 = at once): a card whose run could not start because an
--           earlier run still runs waits this long instead of being claimed again next round
-- Output:
--    1 released: claim, exec right and running entry dropped, score = now + retry after in whichever lane
--    0 the token does not own a live claim (nothing changed; an expired lease is reclaimed and
--      counted by the next claim round)
--   -2 invalid argument
--@include now
--@include lease
--@include dueHash

local claimKey, execKey, runningKey, prioKey, queueKey, dueKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local token, cardId = ARGV[1], ARGV[2]
local now = resolveNow(ARGV[3])
local retryAfter = tonumber(ARGV[4] ~= nil and ARGV[4] ~= '' and ARGV[4] or '0')
if now == nil or token == '' or retryAfter == nil or retryAfter < 0 then return -2 end

if liveClaimExpiry(claimKey, runningKey, token, now) == nil then return 0 end
clearClaim(claimKey, execKey, runningKey, token)
redis.call('HDEL', dueKey, F_DEFERRED, F_UPSERTED)
redis.call('ZADD', prioKey, 'XX', now + retryAfter, cardId)
redis.call('ZADD', queueKey, 'XX', now + retryAfter, cardId)
return 1
