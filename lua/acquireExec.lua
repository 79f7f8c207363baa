-- acquireExec: take the execution right of a claimed card (DESIGN §4.2).
--
-- Input:
--   KEYS[1] claim    STRING card's claim token
--   KEYS[2] exec     STRING execution right `<token>|<executorId>`
--   KEYS[3] running  ZSET lease expiry per token
--   ARGV[1] token
--   ARGV[2] executor id (the run id)
--   ARGV[3] exec TTL ms (> 0); the key gets PX = TTL + margin (safety net, see includes/lease.lua)
--   ARGV[4] now ms ('' = Redis TIME)
-- Output:
--    1 acquired (also when the same executor id asks again: an activity retry is idempotent)
--    0 lost: the token does not own a live claim at now (lease expired, duplicate delivery)
--   -1 busy: another executor already holds this token's exec right
--   -2 invalid argument
--@include now
--@include lease

local claimKey, execKey, runningKey = KEYS[1], KEYS[2], KEYS[3]
local token, value = ARGV[1], ARGV[2]
local ttl = tonumber(ARGV[3])
local now = resolveNow(ARGV[4])
if ttl == nil or ttl <= 0 or now == nil or token == '' or value == '' then return -2 end

if liveClaimExpiry(claimKey, runningKey, token, now) == nil then return 0 end
local record = execRecord(token, value)
-- Usually free: one write.
if redis.call('SET', execKey, record, 'NX', 'PX', ttl + PX_MARGIN_MS) then return 1 end
local current = redis.call('GET', execKey)
if current ~= record and execOwnedBy(current, token) then return -1 end
-- Ours already (refresh), or left over from an earlier token whose claim is gone.
redis.call('SET', execKey, record, 'PX', ttl + PX_MARGIN_MS)
return 1
