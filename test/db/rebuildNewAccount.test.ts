/**
 * A rebuild beside an account being set up (its polling config, then its cards, the way any
 * creator does it: API, import, a script): the pass read the polling configs before the new
 * account's config existed, so its copy polls none of that account's cards. Those cards must stay
 * in their lanes — removing them left them unpolled until the periodic reconcile (5 minutes).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createPollingConfig } from '../../src/db/pollingConfigs.js';
import { rebuild } from '../../src/lifecycle/rebuild.js';
import { LifecycleService } from '../../src/lifecycle/service.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { accountKeys } from '../../src/redis/keys.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { createTestRedis, type TestRedis } from '../../testkit/redis.js';
import { iccid, makeCarrier, storeWithUpsertMany } from './fixtures.js';

let db: TestDb;
let redis: TestRedis;
const NOW = 1_800_000_000_000;

before(async () => {
  db = await createTestDb('rebuild-new-account');
  redis = await createTestRedis('rebuild-new-account');
});
after(async () => {
  await redis.close();
  await db.close();
});

test('rebuild: an account whose polling config and cards were created after the pass read the configs keeps its cards in their lanes', async () => {
  const store = new CarrierQueueStore(redis.redis, redis.namespace);
  const live = new LifecycleService({ pool: db.pool, store, redis: redis.redis, namespace: redis.namespace, now: () => NOW });
  const [older, newer] = [await makeCarrier(db.pool), await makeCarrier(db.pool)];
  await createPollingConfig(db.pool, { name: 'older', match: { carrierId: older.id }, intervalsSec: { card_status: 600 } });
  await live.createCard({ iccid: iccid(7001), carrierId: older.id, enablePolling: true });
  let newCardId: string | undefined;
  // The rebuild's writes go through this store: while it writes the older account's page (it has
  // read the configs already), the newer account gets its config and a card.
  const racing = storeWithUpsertMany(store, async (_inputs, write) => {
    if (newCardId === undefined) {
      await createPollingConfig(db.pool, { name: 'newer', match: { carrierId: newer.id }, intervalsSec: { card_status: 300 } });
      newCardId = (await live.createCard({ iccid: iccid(7002), carrierId: newer.id, enablePolling: true })).id;
      assert.equal(await store.laneOf(newer.id, newCardId), 'normal', 'the lifecycle put the new card in its lane');
    }
    await write();
  });
  const result = await rebuild({ pool: db.pool, redis: redis.redis, store: racing, namespace: redis.namespace }, { now: () => NOW });
  assert.ok(newCardId !== undefined, 'the newer account was set up during the pass');
  assert.equal(result.carriers, 2);
  const keys = accountKeys(redis.namespace, newer.id);
  assert.notEqual(await redis.redis.zscore(keys.queue, newCardId), null, 'the new account’s card is still in its lane');
  assert.equal(result.removed, 0);
});
