/**
 * The lifecycle reconcile repairs what no lifecycle event announced: a polled card removed from
 * Redis behind the product's back, stray cards in an account's lanes (not polled, deleted, of
 * another account), due times for types the card is not polled for — and counts each by kind.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { createPollingConfig } from '../../src/db/pollingConfigs.js';
import { LifecycleService } from '../../src/lifecycle/service.js';
import { createLifecycleMetrics } from '../../src/lifecycle/metrics.js';
import { reconcile, reconcileLockKey } from '../../src/lifecycle/reconcile.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { createTestRedis, type TestRedis } from '../../testkit/redis.js';
import { iccid, makeCarrier } from '../db/fixtures.js';

let db: TestDb;
let redis: TestRedis;

before(async () => {
  db = await createTestDb('reconcile');
  redis = await createTestRedis('reconcile');
  await createPollingConfig(db.pool, { name: 'active', match: { cardStatus: 'active' }, intervalsSec: { card_status: 600, carddata: 3600 } });
});
after(async () => {
  await redis.close();
  await db.close();
});

test('the reconcile repairs cards missing from, stray in and wrong in an account’s Redis, and counts them by kind', async () => {
  const store = new CarrierQueueStore(redis.redis, redis.namespace);
  const deps = { pool: db.pool, store, redis: redis.redis, namespace: redis.namespace };
  const service = new LifecycleService({ ...deps, log: () => undefined });
  const registry = new Registry();
  const metrics = createLifecycleMetrics(registry, db.pool);
  const carrier = await makeCarrier(db.pool);
  const other = await makeCarrier(db.pool);
  const make = (n: number, carrierId = carrier.id) => service.createCard({ iccid: iccid(900 + n), carrierId, status: 'active' });
  const [removed, wrongTypes, deleted, fine] = [await make(1), await make(2), await make(3), await make(4)];
  const unpolled = await make(5);
  await service.disablePolling(unpolled.id);
  const foreign = await make(6, other.id);
  const now = await store.clockNow();

  // Behind the product's back: a polled card taken out of Redis, a disabled card put into a lane,
  // another account's card put into this account's lanes, a card deleted in PostgreSQL only, and
  // a due time for a type the card is not polled for.
  await store.remove(carrier.id, removed.id);
  await store.upsert({ carrierId: carrier.id, cardId: unpolled.id, dues: { card_status: now } });
  await store.upsert({ carrierId: carrier.id, cardId: foreign.id, dues: { card_status: now } });
  await db.pool.query('DELETE FROM iot_card WHERE id = $1', [deleted.id]);
  const kept = (await store.readDue(carrier.id, wrongTypes.id))!;
  await store.upsert({
    carrierId: carrier.id,
    cardId: wrongTypes.id,
    dues: { card_status: kept.types.card_status.due!, carddata: kept.types.carddata.due!, realname: now },
  });
  const fineBefore = await store.readDue(carrier.id, fine.id);

  const result = await reconcile(deps, {}, metrics);
  assert.equal(result.skipped, null);
  assert.deepEqual(result.repaired, { missing: 1, not_polled: 2, other_account: 1, types: 1 });

  assert.equal(await store.laneOf(carrier.id, removed.id), 'normal', 'the removed card is back');
  assert.equal(await store.laneOf(carrier.id, unpolled.id), null, 'the disabled card is out');
  assert.equal(await store.laneOf(carrier.id, deleted.id), null, 'the deleted card is out');
  assert.equal(await store.laneOf(carrier.id, foreign.id), null, 'the other account’s card is out of this one');
  assert.equal(await store.laneOf(other.id, foreign.id), 'normal', '… and still in its own');
  const repairedTypes = (await store.readDue(carrier.id, wrongTypes.id))!;
  assert.equal(repairedTypes.types.realname.due, null, 'the type it is not polled for is gone');
  assert.equal(repairedTypes.types.card_status.due, kept.types.card_status.due, 'the others keep their due times');
  assert.deepEqual(await store.readDue(carrier.id, fine.id), fineBefore, 'a card in line is not touched');

  const counted = Object.fromEntries(
    (await registry.getSingleMetric('cardpoller_lifecycle_repairs_total')!.get()).values.map((value) => [String(value.labels.kind), value.value]),
  );
  assert.deepEqual(counted, { missing: 1, not_polled: 2, other_account: 1, types: 1 });

  // Everything in line now: a second pass repairs nothing.
  const again = await reconcile(deps, {}, metrics);
  assert.deepEqual(again.repaired, { missing: 0, not_polled: 0, other_account: 0, types: 0 });
});

test('one reconcile at a time: a second one while the lock is held is skipped; cards with outbox rows waiting are the relay’s', async () => {
  const store = new CarrierQueueStore(redis.redis, redis.namespace);
  const deps = { pool: db.pool, store, redis: redis.redis, namespace: redis.namespace };
  await redis.redis.set(reconcileLockKey(redis.namespace), 'another-process', 'PX', 30_000);
  assert.equal((await reconcile(deps)).skipped, 'locked');
  await redis.redis.del(reconcileLockKey(redis.namespace));

  const carrier = await makeCarrier(db.pool);
  const service = new LifecycleService({ ...deps, log: () => undefined });
  const card = await service.createCard({ iccid: iccid(950), carrierId: carrier.id, status: 'active' });
  await store.remove(carrier.id, card.id);
  await db.pool.query("INSERT INTO lifecycle_outbox (card_id, carrier_id, next_attempt_at) VALUES ($1, $2, now() + interval '1 hour')", [card.id, carrier.id]);
  const result = await reconcile(deps, { carrierId: carrier.id });
  assert.equal(result.repaired.missing, 0, 'left to the relay');
  assert.equal(await store.laneOf(carrier.id, card.id), null);
});
