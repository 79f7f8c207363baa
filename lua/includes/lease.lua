-- Lease helpers shared by every script that looks at a claim.
--
-- The authority on whether a claim is alive is the `running` ZSET: its score is the lease expiry
-- (ms) and a claim is alive while expiry > now, with "now" from ARGV. The PX on the claim and exec
-- keys is only a safety net that garbage-collects keys of an account nobody claims for any more;
-- it is the requested duration plus PX_MARGIN_MS so Redis' real-time expiry never fires before the
-- ARGV-driven lease (which would make virtual-clock tests and small clock skews lose claims).

-- Added to every PX: generous, because the ARGV lease decides and PX only collects garbage.
local PX_MARGIN_MS = 600000

-- Lease expiry of `token`'s claim from the running ZSET alone, or nil when it is not live at `now`.
-- Enough to know that `token` owns the card's claim: the claim key and the running entry are
-- written together (claim), and every script that drops or overwrites a claim key removes its
-- token's running entry in the same call (clearClaim, finish; claim overwrites a claim key only
-- after its holder's entry is no longer live). So a live entry implies the claim key names the
-- token; the hot scripts (acquireExec, finish) skip reading it.
local function leaseExpiry(runningKey, token, now)
  local expiry = tonumber(redis.call('ZSCORE', runningKey, token))
  if expiry == nil or expiry <= now then return nil end
  return expiry
end

-- Lease expiry of `token`'s claim, or nil when `token` does not own a live claim at `now`; also
-- checks the claim key (renew, release: rare calls, where the cost of one GET does not matter).
local function liveClaimExpiry(claimKey, runningKey, token, now)
  if redis.call('GET', claimKey) ~= token then return nil end
  return leaseExpiry(runningKey, token, now)
end

-- The exec key stores `<token>|<executorId>`: the exec right belongs to one token, so a stale
-- record of an earlier (expired) token never blocks the next owner of the card.
local function execRecord(token, value)
  return token .. '|' .. value
end

local function execOwnedBy(current, token)
  return current ~= false and current ~= nil and string.sub(current, 1, #token + 1) == token .. '|'
end

-- Drops `token`'s claim, its exec right and its running entry (each only if it is token's).
local function clearClaim(claimKey, execKey, runningKey, token)
  if redis.call('GET', claimKey) == token then redis.call('DEL', claimKey) end
  if execOwnedBy(redis.call('GET', execKey), token) then redis.call('DEL', execKey) end
  redis.call('ZREM', runningKey, token)
end
