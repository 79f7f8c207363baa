import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { findActivePriorityItem, requestPriorityItem } from '../../src/db/priorityItems.js';
import { createPollingConfig } from '../../src/db/pollingConfigs.js';
import type { Carrier } from '../../src/domain/carrier.js';
import type { ScopedCard } from '../../src/domain/card.js';
import { rebuild, RebuildLockedError } from '../../src/lifecycle/rebuild.js';
import { LifecycleService } from '../../src/lifecycle/service.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { accountKeys, globalKeys } from '../../src/redis/keys.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { createTestRedis, type TestRedis } from '../helpers/redis.js';
import { iccid, makeCarrier } from './fixtures.js';

let db: TestDb;
let redis: TestRedis;
let store: CarrierQueueStore;
let carriers: Carrier[];
let cards: ScopedCard[];
const NOW = 1_800_000_000_000;

before(async () => {
  db = await createTestDb('rebuild');
  redis = await createTestRedis('rebuild');
  store = new CarrierQueueStore(redis.redis, redis.namespace);
  carriers = [await makeCarrier(db.pool), await makeCarrier(db.pool)];
  await createPollingConfig(db.pool, { name: 'all', intervalsSec: { card_status: 600, carddata: 3600 } });
  const service = new LifecycleService({ pool: db.pool, store, now: () => NOW });
  const created = await service.createCards(
    Array.from({ length: 700 }, (_, i) => ({ iccid: iccid(5000 + i), carrierId: carriers[i % 2]!.id, enablePolling: i % 7 !== 0 })),
  );
  cards = created.created;
});
after(async () => {
  await redis.close();
  await db.close();
});

async function flushNamespace(): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.redis.scan(cursor, 'MATCH', `${redis.namespace}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.redis.unlink(...keys);
  } while (cursor !== '0');
}

/** Lanes a card is in, across every account (I1: a polled card in exactly one lane of one account). */
async function lanesOf(cardId: string): Promise<string[]> {
  const lanes: string[] = [];
  for (const carrier of carriers) {
    const keys = accountKeys(redis.namespace, carrier.id);
    if ((await redis.redis.zscore(keys.prio, cardId)) !== null) lanes.push(`${carrier.id}:priority`);
    if ((await redis.redis.zscore(keys.queue, cardId)) !== null) lanes.push(`${carrier.id}:normal`);
  }
  return lanes;
}

test('rebuild: idempotent and keeps due times that still exist in Redis', async () => {
  const sample = cards.filter((card) => card.polled).slice(0, 20);
  const before = await Promise.all(sample.map((card) => store.readDue(card.carrierId, card.id)));
  const first = await rebuild({ pool: db.pool, redis: redis.redis, store, namespace: redis.namespace }, { batchSize: 128, now: () => NOW + 5000 });
  const polled = cards.filter((card) => card.polled).length;
  assert.equal(first.upserted, polled);
  assert.equal(first.keptDues, polled * 2);
  assert.equal(first.newDues, 0);
  const after = await Promise.all(sample.map((card) => store.readDue(card.carrierId, card.id)));
  assert.deepEqual(
    after.map((due) => due?.types.card_status.due),
    before.map((due) => due?.types.card_status.due),
  );
  const second = await rebuild({ pool: db.pool, redis: redis.redis, store, namespace: redis.namespace }, { batchSize: 128 });
  assert.equal(second.keptDues, polled * 2);
  assert.equal(second.removed, 0);
});

test('rebuild: after flushing the namespace every polled card is back in exactly one lane; stale cards removed; pending items re-requested', async () => {
  const target = cards.find((card) => card.polled)!;
  const { item } = await requestPriorityItem(db.pool, { cardId: target.id, types: ['card_status'], actor: 'ops', source: 'api' });
  const unpolledTarget = cards.find((card) => !card.polled)!;
  const { item: doomed } = await requestPriorityItem(db.pool, { cardId: unpolledTarget.id, types: ['card_status'], actor: 'ops', source: 'api' });

  await flushNamespace();
  assert.equal((await store.depths(carriers[0]!.id)).normal, 0);
  // A card Redis holds that PostgreSQL does not poll under this account (e.g. left over from a move).
  await store.upsert({ carrierId: carriers[0]!.id, cardId: '99999999', now: NOW, dues: { card_status: NOW } });

  const result = await rebuild({ pool: db.pool, redis: redis.redis, store, namespace: redis.namespace }, { batchSize: 100, now: () => NOW });
  const polled = cards.filter((card) => card.polled);
  assert.equal(result.upserted, polled.length);
  assert.equal(result.newDues, polled.length * 2);
  assert.equal(result.requested, 1);
  assert.equal(result.failedItems, 1);
  assert.ok(result.removed >= 1);
  process.stdout.write(`# rebuild of ${cards.length} cards (${polled.length} polled): ${result.durationMs} ms in ${result.batches} batches\n`);

  for (const card of cards) {
    const lanes = await lanesOf(card.id);
    if (card.polled) assert.equal(lanes.length, 1, `card ${card.id} in ${lanes.join(',') || 'no lane'}`);
    else assert.deepEqual(lanes, [], `unpolled card ${card.id} in ${lanes.join(',')}`);
  }
  assert.deepEqual(await lanesOf('99999999'), []);
  assert.equal(await store.laneOf(target.carrierId, target.id), 'priority', 'the pending item was requested again');
  assert.equal((await findActivePriorityItem(db.pool, target.id))?.id, item.id);
  assert.equal(await findActivePriorityItem(db.pool, unpolledTarget.id), null, `item ${doomed.id} failed: card not polled`);
  const due = await store.readDue(carriers[0]!.id, polled.find((card) => card.carrierId === carriers[0]!.id)!.id);
  const at = due!.types.card_status.due!;
  assert.ok(at >= NOW && at < NOW + 60_000, 'fresh dues get the initial jitter');
});

test('rebuild: a second rebuild while one holds the lock is refused; legacy mode skips', async () => {
  const lockKey = globalKeys(redis.namespace).rebuildLock;
  await redis.redis.set(lockKey, 'someone-else', 'PX', 10_000);
  try {
    await assert.rejects(rebuild({ pool: db.pool, redis: redis.redis, store, namespace: redis.namespace }), RebuildLockedError);
  } finally {
    await redis.redis.del(lockKey);
  }
  const { setPollingMode } = await import('../../src/db/systemConfig.js');
  await setPollingMode(db.pool, 'legacy', 'test');
  const skipped = await rebuild({ pool: db.pool, redis: redis.redis, store, namespace: redis.namespace });
  assert.equal(skipped.skipped, 'legacy_mode');
  await setPollingMode(db.pool, 'carrier', 'test');
  // The lock is released after a run: another rebuild can start.
  const again = await rebuild({ pool: db.pool, redis: redis.redis, store, namespace: redis.namespace }, { carrierId: carriers[1]!.id });
  assert.equal(again.carriers, 1);
});
