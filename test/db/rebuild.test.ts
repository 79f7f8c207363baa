import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { findActivePriorityItem, requestPriorityItem } from '../../src/db/priorityItems.js';
import { createPollingConfig } from '../../src/db/pollingConfigs.js';
import type { Carrier } from '../../src/domain/carrier.js';
import type { ScopedCard } from '../../src/domain/card.js';
import { rebuild, RebuildLockedError, requestRebuild } from '../../src/lifecycle/rebuild.js';
import { LifecycleService } from '../../src/lifecycle/service.js';
import { laneMembers } from '../../src/lifecycle/queueStore.js';
import { findCards } from '../../src/db/cards.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { accountKeys, globalKeys } from '../../src/redis/keys.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { createTestRedis, deleteMatching, type TestRedis } from '../../testkit/redis.js';
import { iccid, makeCarrier, storeWithUpsertMany } from './fixtures.js';

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
  const service = new LifecycleService({ pool: db.pool, store, redis: redis.redis, namespace: redis.namespace, now: () => NOW });
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
  // Every master of a cluster (test:cluster runs this file too), else the one server.
  await deleteMatching(redis.redis, `${redis.namespace}*`);
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

test('rebuild beside live lifecycle traffic: cards enabled, moved in or created while it runs stay polled; cards disabled or moved out leave', async () => {
  const [home, other] = [await makeCarrier(db.pool), await makeCarrier(db.pool)];
  const live = new LifecycleService({ pool: db.pool, store, redis: redis.redis, namespace: redis.namespace, now: () => NOW });
  const { created } = await live.createCards(
    Array.from({ length: 240 }, (_, i) => ({ iccid: iccid(9000 + i), carrierId: (i % 2 === 0 ? home : other).id, enablePolling: i % 6 !== 0 })),
  );
  const byId = (a: ScopedCard, b: ScopedCard): number => (BigInt(a.id) < BigInt(b.id) ? -1 : 1);
  const homeCards = created.filter((card) => card.carrierId === home.id).sort(byId);
  const firstPage = homeCards.slice(0, 40);
  const lastOfFirstPage = BigInt(firstPage.at(-1)!.id);
  const unpolledInFirstPage = firstPage.filter((card) => !card.polled);
  const polledInFirstPage = firstPage.filter((card) => card.polled);
  const enabledBeforeWrite = unpolledInFirstPage[0]!;
  const enabledAfterWrite = unpolledInFirstPage[1]!;
  const disabledBeforeWrite = polledInFirstPage[0]!;
  const movedOutBeforeWrite = polledInFirstPage[1]!;
  const movedIn = created.find((card) => card.carrierId === other.id && card.polled && BigInt(card.id) < lastOfFirstPage)!;
  let createdDuring: ScopedCard | undefined;

  // The rebuild's writes go through this store; lifecycle events land between its reads and writes.
  let batches = 0;
  const racing = storeWithUpsertMany(store, async (_inputs, write) => {
    batches += 1;
    if (batches === 1) {
      // After the rebuild read its first page, before it wrote it.
      await live.enablePolling(enabledBeforeWrite.id);
      await live.disablePolling(disabledBeforeWrite.id);
      await live.changeCarrier(movedOutBeforeWrite.id, other.id);
    }
    await write();
    if (batches === 1) {
      // After the first page was written: the rebuild has moved past these ids.
      await live.enablePolling(enabledAfterWrite.id);
      await live.changeCarrier(movedIn.id, home.id);
      createdDuring = await live.createCard({ iccid: iccid(9999), carrierId: home.id, enablePolling: true });
    }
  });

  const result = await rebuild(
    { pool: db.pool, redis: redis.redis, store: racing, namespace: redis.namespace },
    { carrierId: home.id, batchSize: 40, now: () => NOW },
  );
  assert.ok(batches >= 3, `${batches} batches`);
  const lanes = async (card: ScopedCard | undefined): Promise<string[]> => {
    const found: string[] = [];
    for (const carrier of [home, other]) {
      const keys = accountKeys(redis.namespace, carrier.id);
      if ((await redis.redis.zscore(keys.prio, card!.id)) !== null) found.push(`${carrier.id === home.id ? 'home' : 'other'}:priority`);
      if ((await redis.redis.zscore(keys.queue, card!.id)) !== null) found.push(`${carrier.id === home.id ? 'home' : 'other'}:normal`);
    }
    return found;
  };
  assert.deepEqual(
    {
      enabledBeforeWrite: await lanes(enabledBeforeWrite),
      enabledAfterWrite: await lanes(enabledAfterWrite),
      movedIn: await lanes(movedIn),
      createdDuring: await lanes(createdDuring),
      disabledBeforeWrite: await lanes(disabledBeforeWrite),
      movedOutBeforeWrite: await lanes(movedOutBeforeWrite),
    },
    {
      enabledBeforeWrite: ['home:normal'],
      enabledAfterWrite: ['home:normal'],
      movedIn: ['home:normal'],
      createdDuring: ['home:normal'],
      disabledBeforeWrite: [],
      movedOutBeforeWrite: ['other:normal'],
    },
  );
  // Every card PostgreSQL polls under the account is in one of its lanes, nothing else is.
  const polledNow = (
    await findCards(
      db.pool,
      [...created, createdDuring!].map((card) => card.id),
    )
  ).filter((card) => card.carrierId === home.id && card.polled);
  const inLanes = new Set<string>();
  for await (const members of laneMembers(redis.redis, redis.namespace, home.id)) members.forEach((id) => inLanes.add(id));
  assert.deepEqual([...inLanes].sort(), polledNow.map((card) => card.id).sort());
  assert.equal(result.removed, 2, 'taken out: the card disabled and the card moved out after their page was read');
});

test('requested rebuilds: requests while a rebuild runs cost one more pass after it; a pass started elsewhere after the request serves it', async () => {
  const deps = { pool: db.pool, redis: redis.redis, store, namespace: redis.namespace };
  const lockKey = globalKeys(redis.namespace).rebuildLock;
  await redis.redis.set(lockKey, 'another-rebuild', 'PX', 10_000);
  const requests = [requestRebuild(deps, { pollMs: 50 }), requestRebuild(deps, { pollMs: 50 }), requestRebuild(deps, { pollMs: 50 })];
  await sleep(200);
  await redis.redis.del(lockKey);
  const [first, ...others] = await Promise.all(requests);
  assert.equal(first!.length, 1, 'one more pass for three requests');
  assert.equal(first![0]!.skipped, null);
  for (const other of others) assert.equal(other, first);

  // Another process's pass takes the lock and clears the flag when it starts: that serves us.
  await redis.redis.set(lockKey, 'another-rebuild', 'PX', 10_000);
  const served = requestRebuild(deps, { pollMs: 50 });
  await sleep(200);
  await redis.redis.del(`${lockKey}:again`);
  await redis.redis.del(lockKey);
  assert.deepEqual(await served, []);
});
