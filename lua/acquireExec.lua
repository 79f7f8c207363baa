-- acquireExec: take the execution right of a claimed card (docs/design.md, 'Lua scripts').
--
-- Input:
--   KEYS[1] exec     STRING execution right `<token>|<executorId>`
--   KEYS[2] running  ZSET lease expiry per token
--   ARGV[1] token
--   ARGV[2] executor id (the run id)
--   ARGV[3] exec TTL ms (> 0); the key gets PX = TTL + margin (safety net, see includes/lease.lua)
--   ARGV[4] now ms ('' = Redis TIME)
-- Output:
--    1 acquired (also when the same executor id asks again: an activity retry is idempotent)
--    0 lost: the token does not own a live claim at now (lease expired, duplicate delivery)
--   -1 busy: another executor already holds this token's exec right
--   -2 invalid argument
--
-- "The claim is this token's" is read from the running ZSET alone (see leaseExpiry in
-- includes/lease.lua): a live running entry implies the claim key names the token, so the claim
-- key need not be read — the hot path is one ZSCORE and one SET, as in the seed's script (the Go
-- service this project was derived from; its scripts are kept in bench/lua/seed/ as a baseline).
--@include now
--@include lease

local execKey, runningKey = KEYS[1], KEYS[2]
local token, value = ARGV[1], ARGV[2]
local ttl = tonumber(ARGV[3])
local now = resolveNow(ARGV[4])
if ttl == nil or ttl <= 0 or now == nil or token == '' or value == '' then return -2 end

if leaseExpiry(runningKey, token, now) == nil then return 0 end
local record = execRecord(token, value)
-- Usually free: one write.
if redis.call('SET', execKey, record, 'NX', 'PX', ttl + PX_MARGIN_MS) then return 1 end
local current = redis.call('GET', execKey)
if current ~= record and execOwnedBy(current, token) then return -1 end
-- Ours already (refresh), or left over from an earlier token whose claim is gone.
redis.call('SET', execKey, record, 'PX', ttl + PX_MARGIN_MS)
return 1
