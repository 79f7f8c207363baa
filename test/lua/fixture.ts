/**
 * Shared fixture for the Lua tests: a store on a fresh namespace of the real Redis, plus raw
 * readers that look at Redis directly (not through the code under test).
 */
import type { RedisConnection } from '../../src/redis/connection.js';
import { createTestRedis } from '../../testkit/redis.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import type { AccountKeys } from '../../src/redis/keys.js';
import { CARRIER_SCRIPTS } from '../../src/redis/carrierScripts.js';
import { loadLuaSource } from '../../src/redis/scriptLoader.js';

export interface Fixture {
  readonly redis: RedisConnection;
  readonly store: CarrierQueueStore;
  readonly namespace: string;
  keys(carrierId: string | number): AccountKeys;
  /** Lane score of a card, null when not in that lane. */
  score(carrierId: string | number, lane: 'prio' | 'queue' | 'running', member: string): Promise<number | null>;
  hash(carrierId: string | number, cardId: string): Promise<Record<string, string>>;
  close(): Promise<void>;
}

/** Prepended to a script: refuses a command on a key its call did not declare. */
export const DECLARED_KEYS_PRELUDE = `
local __declared = {}
for _, k in ipairs(KEYS) do __declared[k] = true end
local __allKeys = { DEL = true, EXISTS = true, UNLINK = true, MGET = true, TOUCH = true }
local __noKeys = { TIME = true }
local __redis = redis
local redis = setmetatable({
  call = function(command, ...)
    local c = string.upper(command)
    local args = {...}
    if not __noKeys[c] then
      local last = __allKeys[c] and #args or 1
      for i = 1, last do
        if not __declared[args[i]] then error('undeclared key ' .. tostring(args[i]) .. ' in ' .. c) end
      end
    end
    return __redis.call(command, ...)
  end,
}, { __index = __redis })
`;

/** Registers the checked scripts on `redis` under their own names, before any store does. */
export function registerCheckedScripts(redis: RedisConnection, definitions: readonly { name: string; numberOfKeys: number | 'variable' }[]): void {
  for (const definition of definitions) {
    const lua = DECLARED_KEYS_PRELUDE + loadLuaSource(definition.name);
    redis.defineCommand(definition.name, definition.numberOfKeys === 'variable' ? { lua } : { numberOfKeys: definition.numberOfKeys, lua });
  }
}

export async function createFixture(label: string): Promise<Fixture> {
  const test = await createTestRedis(label);
  // Every script of these tests refuses a key its call did not declare (Redis Cluster).
  registerCheckedScripts(test.redis, Object.values(CARRIER_SCRIPTS));
  const store = new CarrierQueueStore(test.redis, test.namespace);
  const keys = (carrierId: string | number): AccountKeys => store.keys(carrierId);
  return {
    redis: test.redis,
    store,
    namespace: test.namespace,
    keys,
    async score(carrierId, lane, member) {
      const raw = await test.redis.zscore(keys(carrierId)[lane], member);
      return raw === null ? null : Number(raw);
    },
    hash: (carrierId, cardId) => test.redis.hgetall(keys(carrierId).due(cardId)),
    close: () => test.close(),
  };
}

/** The token claim.lua gives `cardId` in a round with `prefix` at `claimedAt` (ms). */
export const tokenOf = (prefix: string, cardId: string, claimedAt: number): string => `${prefix}@${claimedAt}:${cardId}`;

/** Claim defaults for tests: generous limits, no budget. */
export const CLAIM_DEFAULTS = {
  carrierId: 1,
  leaseMs: 1_000,
  inflightLimit: 100,
  priorityRatio: 0,
  tokenPrefix: 'r1',
  typeGroups: { card_status: 'g1', carddata: 'g1', realname: 'g2' },
  countRealname: true,
} as const;
