-- markIdle: after a claim round that claimed nothing, decide whether the account's scheduler may
-- sleep past its tick, and until when (docs/design.md, 'Idle accounts').
--
-- Input:
--   KEYS[1] prio     ZSET priority lane (score = earliest due, ms; a claimed card = its lease end)
--   KEYS[2] queue    ZSET normal lane
--   KEYS[3] running  ZSET claim tokens in flight (score = lease expiry, ms)
--   KEYS[4] idle     STRING the instant (ms) the account's scheduler sleeps until
--   ARGV[1] now ms ('' = Redis TIME)
--   ARGV[2] longest sleep ms (> 0): an account with nothing in its lanes wakes this often
--   ARGV[3] due horizon ms (>= 0): the round claims cards this far ahead of their due time
--   ARGV[4] shortest sleep worth taking ms (>= 0): below it the scheduler keeps its tick
-- Output:
--   ms the scheduler may sleep (> 0): `idle` now holds now + that
--   0 not idle: a claim is in flight (its finish sets the card's next due, which may be soon), or
--     a card falls due within the shortest sleep; `idle` is deleted
--   -2 invalid argument
--
-- A writer that makes a card due earlier than `idle` (a lifecycle upsert) wakes the scheduler
-- (wakeIfIdle.lua). Deciding here, in one step with the read of the lanes, leaves no gap: a due
-- written before this script is in the lanes it reads; one written after finds `idle` set.
--@include now

local prioKey, queueKey, runningKey, idleKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = resolveNow(ARGV[1])
local longest, horizon, shortest = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if now == nil or longest == nil or longest <= 0 or horizon == nil or horizon < 0 or shortest == nil or shortest < 0 then return -2 end

if redis.call('ZCARD', runningKey) > 0 then
  redis.call('DEL', idleKey)
  return 0
end
local wakeAt = now + longest
for _, lane in ipairs({ prioKey, queueKey }) do
  local first = redis.call('ZRANGE', lane, 0, 0, 'WITHSCORES')
  if #first == 2 then
    local due = tonumber(first[2]) - horizon
    if due < wakeAt then wakeAt = due end
  end
end
local sleep = math.floor(wakeAt - now)
if sleep < shortest or sleep <= 0 then
  redis.call('DEL', idleKey)
  return 0
end
-- Kept a while past the wake-up: a writer reading it late still compares against the right instant.
redis.call('SET', idleKey, wakeAt, 'PX', sleep + longest)
return sleep
