/**
 * A polling interval cut short takes effect at the rebuild (issue 46, item 4): a due time kept from
 * Redis is never later than one new interval from now, as the lifecycle's own writes already had
 * it (src/lifecycle/jitter.ts). Before, a carddata interval cut from a day to 5 minutes left the
 * cards up to a day late.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createPollingConfig, updatePollingConfig } from '../../src/db/pollingConfigs.js';
import { rebuild } from '../../src/lifecycle/rebuild.js';
import { LifecycleService } from '../../src/lifecycle/service.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { createTestRedis, type TestRedis } from '../../testkit/redis.js';
import { iccid, makeCarrier } from './fixtures.js';

const NOW = 1_800_000_000_000;
const DAY_MS = 86_400_000;
let db: TestDb;
let redis: TestRedis;

before(async () => {
  db = await createTestDb('rebuild-shortened');
  redis = await createTestRedis('rebuild-shortened');
});
after(async () => {
  await redis.close();
  await db.close();
});

test('rebuild: a kept due time is brought within the new, shorter interval; one within it is kept', async () => {
  const store = new CarrierQueueStore(redis.redis, redis.namespace);
  const carrier = await makeCarrier(db.pool);
  const config = await createPollingConfig(db.pool, { name: 'daily', intervalsSec: { carddata: 86_400, card_status: 600 } });
  const service = new LifecycleService({ pool: db.pool, store, redis: redis.redis, namespace: redis.namespace, now: () => NOW });
  const { created } = await service.createCards([0, 1].map((i) => ({ iccid: iccid(9100 + i), carrierId: carrier.id, enablePolling: true })));
  const [far, near] = created.map((card) => card.id);
  // The cards' carddata is due in a day (far) and in a minute (near); card_status in 5 minutes.
  await store.upsert({ carrierId: carrier.id, cardId: far!, now: NOW, dues: { carddata: NOW + DAY_MS, card_status: NOW + 300_000 } });
  await store.upsert({ carrierId: carrier.id, cardId: near!, now: NOW, dues: { carddata: NOW + 60_000, card_status: NOW + 300_000 } });

  await updatePollingConfig(db.pool, config.id, { intervalsSec: { carddata: 300, card_status: 600 } });
  await rebuild({ pool: db.pool, redis: redis.redis, store, namespace: redis.namespace }, { now: () => NOW });

  const dues = async (cardId: string) => (await store.readDue(carrier.id, cardId))?.types;
  assert.equal((await dues(far!))?.carddata?.due, NOW + 300_000, 'a day away, brought to one new interval from now');
  assert.equal((await dues(near!))?.carddata?.due, NOW + 60_000, 'within the new interval: kept (the card keeps its phase)');
  assert.equal((await dues(far!))?.card_status?.due, NOW + 300_000, 'an unchanged interval keeps its due');
});
