-- Due-hash helpers. Field names must match src/redis/dueFields.ts.
local F_DUE = 'due:'
local F_REQ = 'req:'
local F_OK = 'ok:'
local F_CFM = 'cfm:'
local F_EXP = 'exp:'
local F_PRIO = 'prio'
local F_CARRIER = 'carrier'
local F_CLAIMED_AT = 'clm'
-- Score of a card with no due type at all: look again in an hour rather than never.
local NO_DUE_RETRY_MS = 3600000

-- Earliest `due:*` value in the hash, or nil when the card has no due type.
local function earliestDue(dueKey)
  local fields = redis.call('HGETALL', dueKey)
  local earliest = nil
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, #F_DUE) == F_DUE then
      local v = tonumber(fields[i + 1])
      if v and (earliest == nil or v < earliest) then earliest = v end
    end
  end
  return earliest
end
