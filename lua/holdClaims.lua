-- holdClaims: extend the leases of claims whose run has not taken them up yet (docs/design.md,
-- 'Lua scripts').
--
-- A scheduler starts one child per claimed card; a saturated server may hold such a start back
-- for longer than the lease (overload bench, child mode: one start 21 s after its claim on a 20 s
-- lease). The next round would then reclaim the card as expired and the late run find its claim
-- lost. While its scheduler waits for a start, it holds the claim with this script. A claim whose
-- run has taken the exec right is left alone: that run renews its own lease (renew.lua).
--
-- Input:
--   KEYS[1] running  ZSET lease expiry per token
--   KEYS[2] prio     ZSET priority lane
--   KEYS[3] queue    ZSET normal lane
--   KEYS[4 ..]       per card two keys: its claim STRING and exec STRING
--   ARGV[1] lease ms (> 0): new expiry = now + lease (never earlier than the current one)
--   ARGV[2] now ms ('' = Redis TIME)
--   ARGV[3 ..] per card of the KEYS pairs, in order: card id, token
-- Output:
--   n  the number of claims held: `token` owned a live claim and no run holds its exec right;
--      their running expiry and the card's score (in whichever lane) = the new expiry. Any other
--      card is untouched (claim gone, expired, another token's, or taken up by its run).
--   -2 invalid argument
--@include now
--@include lease

local runningKey, prioKey, queueKey = KEYS[1], KEYS[2], KEYS[3]
local lease = tonumber(ARGV[1])
local now = resolveNow(ARGV[2])
local cards = (#KEYS - 3) / 2
if lease == nil or lease <= 0 or now == nil or cards ~= math.floor(cards) or #ARGV ~= 2 + 2 * cards then return -2 end

local held = 0
for i = 0, cards - 1 do
  local claimKey, execKey = KEYS[4 + 2 * i], KEYS[5 + 2 * i]
  local cardId, token = ARGV[3 + 2 * i], ARGV[4 + 2 * i]
  local expiry = token ~= '' and liveClaimExpiry(claimKey, runningKey, token, now) or nil
  if expiry ~= nil and not execOwnedBy(redis.call('GET', execKey), token) then
    local until_ = math.max(expiry, now + lease)
    redis.call('PEXPIRE', claimKey, until_ - now + PX_MARGIN_MS)
    redis.call('ZADD', runningKey, 'XX', until_, token)
    redis.call('ZADD', prioKey, 'XX', until_, cardId)
    redis.call('ZADD', queueKey, 'XX', until_, cardId)
    held = held + 1
  end
end
return held
