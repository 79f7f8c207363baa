-- resolveNow: the script's notion of "now" in milliseconds.
-- Callers normally pass "now" in ARGV (tests drive a virtual clock that way). An empty string
-- means "use Redis' own clock" (TIME), so that processes with skewed clocks still agree; Redis 7
-- replicates script effects, so reading TIME before writing is allowed.
local function resolveNow(raw)
  if raw == nil or raw == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return tonumber(raw)
end
