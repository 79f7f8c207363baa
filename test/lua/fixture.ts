/**
 * Shared fixture for the Lua tests: a store on a fresh namespace of the real Redis, plus raw
 * readers that look at Redis directly (not through the code under test).
 */
import type { RedisConnection } from '../../src/redis/connection.js';
import { createTestRedis } from '../helpers/redis.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import type { AccountKeys } from '../../src/redis/keys.js';

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

export async function createFixture(label: string): Promise<Fixture> {
  const test = await createTestRedis(label);
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
