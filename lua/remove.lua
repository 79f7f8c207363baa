-- remove: take a card out of polling in this account (docs/design.md, 'Lua scripts').
-- An executing card keeps its claim; its finish then finds the card in no lane and neither
-- writes the result back nor re-adds it.
--
-- Input:
--   KEYS[1] prio   ZSET priority lane
--   KEYS[2] queue  ZSET normal lane
--   KEYS[3] due    HASH card state (deleted)
--   ARGV[1] card id
-- Output:
--   1 the card was in a lane, 0 it was not (idempotent)
local prioKey, queueKey, dueKey = KEYS[1], KEYS[2], KEYS[3]
local cardId = ARGV[1]
local removed = redis.call('ZREM', prioKey, cardId) + redis.call('ZREM', queueKey, cardId)
redis.call('DEL', dueKey)
if removed > 0 then return 1 end
return 0
