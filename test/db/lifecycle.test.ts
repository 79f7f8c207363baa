import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { getCard } from '../../src/db/cards.js';
import { createPollingConfig } from '../../src/db/pollingConfigs.js';
import { setPollingMode } from '../../src/db/systemConfig.js';
import type { Carrier } from '../../src/domain/carrier.js';
import { DomainError } from '../../src/domain/errors.js';
import { LifecycleService } from '../../src/lifecycle/service.js';
import type { LifecycleStore } from '../../src/lifecycle/queueStore.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { createTestRedis, type TestRedis } from '../../testkit/redis.js';
import { countStatements, iccid, makeCarrier, makeDevice } from './fixtures.js';

let db: TestDb;
let redis: TestRedis;
let store: CarrierQueueStore;
let service: LifecycleService;
let carrier: Carrier;
let other: Carrier;
const NOW = 1_800_000_000_000;

before(async () => {
  db = await createTestDb('lifecycle');
  redis = await createTestRedis('lifecycle');
  store = new CarrierQueueStore(redis.redis, redis.namespace);
  service = new LifecycleService({ pool: db.pool, store, redis: redis.redis, namespace: redis.namespace, now: () => NOW });
  carrier = await makeCarrier(db.pool);
  other = await makeCarrier(db.pool);
  // Only active cards are polled: card_status every 10 min, carddata hourly.
  await createPollingConfig(db.pool, { name: 'active', match: { cardStatus: 'active' }, intervalsSec: { card_status: 600, carddata: 3600 } });
});
after(async () => {
  await redis.close();
  await db.close();
});

const isError = (code: DomainError['code'], field: string) => (error: unknown) => error instanceof DomainError && error.code === code && error.field === field;

test('lifecycle: created card is due per type at now + jitter in [0, max(interval/10, 2 s))', async () => {
  const card = await service.createCard({ iccid: iccid(1), carrierId: carrier.id, msisdn: '8613800000000' });
  assert.equal(card.polled, true);
  assert.equal(await store.laneOf(carrier.id, card.id), 'normal');
  const due = await store.readDue(carrier.id, card.id);
  const status = due!.types.card_status.due!;
  const data = due!.types.carddata.due!;
  assert.ok(status >= NOW && status < NOW + 60_000, `card_status due ${status - NOW}`);
  assert.ok(data >= NOW && data < NOW + 360_000, `carddata due ${data - NOW}`);
  assert.equal(due!.types.realname.due, null, 'a type without an interval is not polled');
});

test('lifecycle: bad input is a typed error naming the field, nothing written', async () => {
  await assert.rejects(service.createCard({ iccid: iccid(1), carrierId: carrier.id }), isError('conflict', 'iccid'));
  await assert.rejects(service.createCard({ iccid: iccid(2), carrierId: '999999' }), isError('not_found', 'carrierId'));
  await assert.rejects(service.createCard({ iccid: 'abc', carrierId: carrier.id }), isError('invalid', 'iccid'));
  await assert.rejects(service.createCard({ iccid: iccid(2), carrierId: carrier.id, status: 'lost' as never }), isError('invalid', 'status'));
  await assert.rejects(service.createCard({ iccid: iccid(2), carrierId: carrier.id, deviceId: '999999' }), isError('not_found', 'deviceId'));
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM iot_card WHERE iccid = $1', [iccid(2)]);
  assert.equal(rows[0]!.n, 0);
  const batch = await service.createCards([
    { iccid: iccid(3), carrierId: carrier.id },
    { iccid: iccid(3), carrierId: carrier.id },
    { iccid: iccid(4), carrierId: '999999' },
  ]);
  assert.equal(batch.created.length, 1);
  assert.deepEqual(
    batch.rejected.map((r) => [r.row, r.code, r.field]),
    [
      [1, 'conflict', 'iccid'],
      [2, 'not_found', 'carrierId'],
    ],
  );
});

test('lifecycle: polling disabled / enabled, status change, carrier change, delete', async () => {
  const card = await service.createCard({ iccid: iccid(10), carrierId: carrier.id });
  await service.disablePolling(card.id);
  assert.equal(await store.laneOf(carrier.id, card.id), null);
  await service.enablePolling(card.id);
  assert.equal(await store.laneOf(carrier.id, card.id), 'normal');
  await service.changeStatus(card.id, 'suspended');
  assert.equal(await store.laneOf(carrier.id, card.id), null, 'no config matches suspended cards');
  await service.changeStatus(card.id, 'active');
  assert.equal(await store.laneOf(carrier.id, card.id), 'normal');
  await assert.rejects(service.changeStatus('999999', 'active'), isError('not_found', 'cardId'));

  const moved = await service.changeCarrier(card.id, other.id);
  assert.equal(moved.carrierId, other.id);
  assert.equal(await store.laneOf(carrier.id, card.id), null, 'removed from the old account');
  assert.equal(await store.laneOf(other.id, card.id), 'normal');
  await assert.rejects(service.changeCarrier(card.id, '999999'), isError('not_found', 'carrierId'));
  assert.equal((await getCard(db.pool, card.id)).carrierId, other.id);

  assert.equal(await service.deleteCard(card.id), true);
  assert.equal(await store.laneOf(other.id, card.id), null);
  assert.equal(await service.deleteCard(card.id), false);
});

test('lifecycle: disabling a device takes its non-standalone cards out; standalone cards stay', async () => {
  const device = { id: await makeDevice(db.pool, 'dev-1') };
  const bound = await service.createCard({ iccid: iccid(20), carrierId: carrier.id, deviceId: device.id });
  const standalone = await service.createCard({ iccid: iccid(21), carrierId: carrier.id, deviceId: device.id, standalone: true });
  assert.equal(bound.standalone, false);
  assert.equal(bound.deviceId, device.id);
  const affected = await service.setDevicePolling(device.id, false);
  assert.deepEqual(
    affected.map((card) => [card.id, card.polled]),
    [[bound.id, false]],
  );
  assert.equal(await store.laneOf(carrier.id, bound.id), null);
  assert.equal(await store.laneOf(carrier.id, standalone.id), 'normal');
  // Re-enabling the card's own switch does not bypass the device switch.
  await service.enablePolling(bound.id);
  assert.equal(await store.laneOf(carrier.id, bound.id), null);
  await service.setDevicePolling(device.id, true);
  assert.equal(await store.laneOf(carrier.id, bound.id), 'normal');
});

test('lifecycle: legacy mode changes PostgreSQL only', async () => {
  await setPollingMode(db.pool, 'legacy', 'test');
  try {
    const card = await service.createCard({ iccid: iccid(30), carrierId: carrier.id });
    assert.equal(card.polled, true);
    assert.equal(await store.laneOf(carrier.id, card.id), null);
    await service.disablePolling(card.id);
    assert.equal((await getCard(db.pool, card.id)).enablePolling, false);
  } finally {
    await setPollingMode(db.pool, 'carrier', 'test');
  }
});

/** Counts store calls: each upsertMany / removeMany is one pipeline. */
function countingStore(inner: CarrierQueueStore): { store: LifecycleStore; calls: () => number } {
  let calls = 0;
  const count =
    <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
    (...args: A): Promise<R> => {
      calls += 1;
      return fn(...args);
    };
  return {
    store: {
      upsert: count(inner.upsert.bind(inner)),
      upsertMany: count(inner.upsertMany.bind(inner)),
      remove: count(inner.remove.bind(inner)),
      removeMany: count(inner.removeMany.bind(inner)),
      clockNow: () => inner.clockNow(),
      requestCheck: count(inner.requestCheck.bind(inner)),
      laneOf: count(inner.laneOf.bind(inner)),
    },
    calls: () => calls,
  };
}

test('lifecycle: batch create and status change of 10 000 cards use a constant number of statements and one pipeline', async () => {
  const N = 10_000;
  const counting = countingStore(store);
  const batchService = new LifecycleService({ pool: db.pool, store: counting.store, redis: redis.redis, namespace: redis.namespace, now: () => NOW });
  const inputs = Array.from({ length: N }, (_, i) => ({ iccid: iccid(1_000_000 + i), carrierId: other.id }));

  let t0 = performance.now();
  const created = await countStatements(pg, () => batchService.createCards(inputs));
  const createMs = performance.now() - t0;
  assert.equal(created.result.created.length, N);
  assert.equal(created.result.rejected.length, 0);
  const createCalls = counting.calls();
  assert.equal(createCalls, 1, 'one upsertMany pipeline');
  assert.ok(created.statements <= 10, `create used ${created.statements} statements`);
  assert.equal((await store.depths(other.id)).normal, N);

  const ids = created.result.created.map((card) => card.id);
  t0 = performance.now();
  const changed = await countStatements(pg, () => batchService.changeStatuses(ids.map((cardId) => ({ cardId, status: 'suspended' as const }))));
  const statusMs = performance.now() - t0;
  assert.equal(changed.result.length, N);
  assert.equal(counting.calls() - createCalls, 1, 'one pipeline for the status change');
  // BEGIN, UPDATE, outbox rows, COMMIT, polling context, the re-read after the Redis write, the rows' delete.
  assert.ok(changed.statements <= 7, `status change used ${changed.statements} statements`);
  assert.equal((await store.depths(other.id)).normal, 0, 'suspended cards left polling');

  process.stdout.write(
    `# batch 10000: create ${createMs.toFixed(0)} ms, ${created.statements} SQL statements, 1 Redis pipeline; ` +
      `status change ${statusMs.toFixed(0)} ms, ${changed.statements} SQL statements, 1 Redis pipeline\n`,
  );
});
