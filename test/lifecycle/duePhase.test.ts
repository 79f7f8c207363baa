/**
 * A status change keeps the card's phase: due times of the types the card is still polled for stay
 * as they were; only a type the new status adds gets a fresh (jittered) due time.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createPollingConfig } from '../../src/db/pollingConfigs.js';
import { LifecycleService } from '../../src/lifecycle/service.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { createTestRedis, type TestRedis } from '../../testkit/redis.js';
import { iccid, makeCarrier } from '../db/fixtures.js';

let db: TestDb;
let redis: TestRedis;
const T0 = 1_800_000_000_000;

before(async () => {
  db = await createTestDb('due-phase');
  redis = await createTestRedis('due-phase');
  await createPollingConfig(db.pool, { name: 'active', match: { cardStatus: 'active' }, intervalsSec: { card_status: 600, carddata: 3600 } });
  await createPollingConfig(db.pool, { name: 'test', match: { cardStatus: 'test' }, intervalsSec: { card_status: 600, carddata: 3600, realname: 86_400 } });
});
after(async () => {
  await redis.close();
  await db.close();
});

test('a status change keeps the due times of the types that remain; only a new type gets a fresh one', async () => {
  let now = T0;
  const store = new CarrierQueueStore(redis.redis, redis.namespace);
  const service = new LifecycleService({ pool: db.pool, store, redis: redis.redis, namespace: redis.namespace, now: () => now, random: () => 0.5 });
  const carrier = await makeCarrier(db.pool);
  const card = await service.createCard({ iccid: iccid(501), carrierId: carrier.id, status: 'active' });
  const before = await store.readDue(carrier.id, card.id);
  const statusDue = before!.types.card_status.due!;
  const dataDue = before!.types.carddata.due!;

  // Ten minutes later the card moves to a status polled for one more type.
  now = T0 + 600_000;
  await service.changeStatus(card.id, 'test');
  const afterChange = await store.readDue(carrier.id, card.id);
  assert.equal(afterChange!.types.card_status.due, statusDue, 'card_status keeps its due time (phase)');
  assert.equal(afterChange!.types.carddata.due, dataDue, 'carddata keeps its due time (phase)');
  const realname = afterChange!.types.realname.due!;
  assert.ok(realname >= now && realname < now + 8_640_000, `realname gets a fresh jittered due (${realname - now} ms after now)`);

  // Back to active: realname leaves, the other two still keep theirs.
  now = T0 + 1_200_000;
  await service.changeStatus(card.id, 'active');
  const back = await store.readDue(carrier.id, card.id);
  assert.equal(back!.types.card_status.due, statusDue);
  assert.equal(back!.types.carddata.due, dataDue);
  assert.equal(back!.types.realname.due, null, 'a type no longer polled is gone');
});
