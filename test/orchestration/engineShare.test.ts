/**
 * Accounts sharing a saturated engine learn their fair rate through the claim round
 * (docs/design.md §8.1): each round writes the account's rate into the shared Redis table and gets
 * back its budget-weighted share of the accounts' summed rates. The real claim round activity over
 * the stack's Redis and PostgreSQL.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackControlActivities, type Stack } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';
import { globalKeys } from '../../src/redis/keys.js';
import type { ClaimRoundInput } from '../../src/workflow-safe/claimRound.js';
import { CarrierQueueStore, ENGINE_SHARE_READ_EVERY_MS } from '../../src/redis/carrierQueueStore.js';
import { createTestRedis } from '../../testkit/redis.js';

async function account(stack: Stack, name: string, qps: number): Promise<string> {
  const seeded = await seedAccount(stack, { name, qps: { main: qps }, typeGroups: { card_status: 'main' }, cards: 2, intervalsSec: { card_status: 600 } });
  return seeded.carrier.id;
}

test('claim rounds publish the rate of each account and answer its budget-weighted fair rate of a saturated engine', async () => {
  const stack = await createStack('engine-share');
  try {
    const small = await account(stack, 'share1', 10);
    const large = await account(stack, 'share4', 40);
    // The table read at every round (production reads it once a second per process: the test below).
    const store = new CarrierQueueStore(stack.redis.redis, stack.redis.namespace, { engineShareReadEveryMs: 0 });
    const activities = stackControlActivities(stack, { store });
    let round = 0;
    const claimRound = async (carrierId: string, engineShare?: ClaimRoundInput['engineShare']) => {
      round += 1;
      const result = await activities.claimRound({
        carrierId,
        tokenPrefix: `share.${round}`,
        refreshConfig: false,
        sinceLastRoundMs: 1000,
        adaptiveLimit: 10,
        cardRuns: { taskQueues: stack.taskQueues, workflowIdPrefix: '', claimedBy: 'test' },
        ...(engineShare === undefined ? {} : { engineShare }),
      });
      assert.equal(result.kind, 'claimed');
      return result.kind === 'claimed' ? result.fairRatePerSec : undefined;
    };
    // Alone in the table: no share to keep.
    assert.equal(await claimRound(small, { startsPerSec: 20, wanting: true }), undefined);
    // Both at 20/s, held back by the engine: 40/s split 10 : 40.
    assert.equal(await claimRound(large, { startsPerSec: 20, wanting: true }), 32);
    assert.equal(await claimRound(small, { startsPerSec: 20, wanting: true }), 8);
    // A scheduler of older code sends no rate: no bound, and its table entry stays as it was.
    assert.equal(await claimRound(small), undefined);
    // Nobody held back by the engine: no bound for anyone.
    assert.equal(await claimRound(small, { startsPerSec: 20, wanting: false }), 8, 'the large account still wants more');
    assert.equal(await claimRound(large, { startsPerSec: 20, wanting: false }), undefined);

    // An entry not written for a minute (an account gone) is dropped from the table.
    const table = globalKeys(stack.redis.namespace).engineShares;
    await stack.redis.redis.hset(table, '999999', JSON.stringify({ startsPerSec: 50, weight: 100, wanting: true, at: Date.now() - 120_000 }));
    await stack.redis.redis.hset(table, 'junk', 'not json');
    await claimRound(large, { startsPerSec: 20, wanting: true });
    assert.deepEqual(Object.keys(await stack.redis.redis.hgetall(table)).sort(), [large, small].sort());
  } finally {
    await stack.close();
  }
});

test("the engine share table is read once a second per process, not at every round: 200 accounts' rounds in one second, one read", async () => {
  const redis = await createTestRedis('engine-share-reads');
  try {
    const store = new CarrierQueueStore(redis.redis, redis.namespace);
    let reads = 0;
    const hgetall = redis.redis.hgetall.bind(redis.redis);
    redis.redis.hgetall = (...args: Parameters<typeof hgetall>) => {
      reads += 1;
      return hgetall(...args);
    };
    const at = Date.now();
    let last: number | undefined;
    for (let account = 1; account <= 200; account += 1) {
      const entries = await store.shareEngine({ carrierId: String(account), startsPerSec: 1, weight: 1, wanting: true, at: at + (account % 10) });
      last = entries.length;
    }
    assert.equal(reads, 1, 'one read of the whole table for 200 rounds within a second');
    assert.equal(last, 200, "this process's own writes since the read are in the answer");
    await store.shareEngine({ carrierId: '1', startsPerSec: 1, weight: 1, wanting: true, at: at + 10 + ENGINE_SHARE_READ_EVERY_MS });
    assert.equal(reads, 2, 'read again once a second has passed');
  } finally {
    await redis.close();
  }
});
