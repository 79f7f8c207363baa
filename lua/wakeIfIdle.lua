-- wakeIfIdle: whether a card made due at ARGV[1] falls before the instant the account's scheduler
-- sleeps until (markIdle.lua); if so the mark is cleared and the caller wakes the scheduler (one
-- wake per sleep, however many writers find it) (docs/design.md, 'Idle accounts').
--
-- Input:
--   KEYS[1] idle  STRING the instant (ms) the account's scheduler sleeps until
--   ARGV[1] the earliest due time (ms) the caller wrote in the account's lanes
-- Output:
--   1 the scheduler sleeps past it: wake it (the mark is gone)
--   0 it does not sleep, or wakes in time on its own
--   -2 invalid argument
local idleKey = KEYS[1]
local due = tonumber(ARGV[1])
if due == nil then return -2 end
local wakeAt = tonumber(redis.call('GET', idleKey))
if wakeAt == nil or due >= wakeAt then return 0 end
redis.call('DEL', idleKey)
return 1
