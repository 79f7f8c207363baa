/**
 * A rebuild or the outbox relay never writes back a stale due time (issue 46, item 5): both read a
 * card's due times, then upsert; a finish or a lifecycle write landing in between set a newer one,
 * which the old write replaced with what it had read (docs/design.md, 'Lifecycle' and 'Rebuild').
 * The write is now conditional inside upsert.lua: a due time Redis holds is kept, at most lowered
 * to now + the interval. The racing write is made between the read and the write by the store the
 * rebuild or relay writes through.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createPollingConfig, updatePollingConfig } from '../../src/db/pollingConfigs.js';
import type { Carrier } from '../../src/domain/carrier.js';
import { relayOutboxOnce } from '../../src/lifecycle/outboxRelay.js';
import { insertOutboxRows } from '../../src/lifecycle/outboxRows.js';
import { rebuild } from '../../src/lifecycle/rebuild.js';
import { LifecycleService } from '../../src/lifecycle/service.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { createTestRedis, type TestRedis } from '../../testkit/redis.js';
import { iccid, makeCarrier, storeWithUpsertMany } from '../db/fixtures.js';

const NOW = 1_800_000_000_000;
const INTERVAL_MS = 600_000;
const DAY_MS = 86_400_000;
let db: TestDb;
let redis: TestRedis;
let store: CarrierQueueStore;
let service: LifecycleService;
let serial = 0;

before(async () => {
  db = await createTestDb('due-race');
  redis = await createTestRedis('due-race');
  store = new CarrierQueueStore(redis.redis, redis.namespace);
  // Every new type due at NOW exactly (no jitter), so the tests know the due times.
  service = new LifecycleService({ pool: db.pool, store, redis: redis.redis, namespace: redis.namespace, now: () => NOW, random: () => 0 });
});
after(async () => {
  await redis.close();
  await db.close();
});

/** An account polling card_status every 10 minutes (its own config), with one card due at NOW. */
async function accountWithCard(): Promise<{ carrier: Carrier; cardId: string; configId: string }> {
  const carrier = await makeCarrier(db.pool);
  const config = await createPollingConfig(db.pool, { name: `race-${carrier.id}`, match: { carrierId: carrier.id }, intervalsSec: { card_status: 600 } });
  const card = await service.createCard({ iccid: iccid(70_000 + ++serial), carrierId: carrier.id, enablePolling: true });
  assert.equal((await store.readDue(carrier.id, card.id))?.types.card_status.due, NOW);
  return { carrier, cardId: card.id, configId: config.id };
}

/** Claims the card at NOW + 1 s; returns a function that finishes that claim (next due one interval on). */
async function claimed(carrierId: string, cardId: string): Promise<{ finish: () => Promise<void>; nextDue: number }> {
  const at = NOW + 1_000;
  const round = await store.claim({
    carrierId,
    now: at,
    leaseMs: 60_000,
    inflightLimit: 10,
    priorityRatio: 0,
    tokenPrefix: `race${serial}`,
    typeGroups: { card_status: 'status' },
    countRealname: false,
  });
  const token = round.claimed.find((claim) => claim.cardId === cardId)?.token;
  assert.ok(token, 'the card is claimed');
  const nextDue = at + INTERVAL_MS;
  return {
    nextDue,
    finish: async () => {
      const done = await store.finish({ carrierId, cardId, token, now: at, set: { 'due:card_status': nextDue, 'ok:card_status': at }, del: [] });
      assert.equal(done, true, 'the finish lands');
    },
  };
}

const dueOf = async (carrierId: string, cardId: string): Promise<number | null | undefined> => (await store.readDue(carrierId, cardId))?.types.card_status.due;

test('rebuild: a finish landing between its read and its write keeps the due time it set', async () => {
  const { carrier, cardId } = await accountWithCard();
  const run = await claimed(carrier.id, cardId);
  let raced = false;
  const racing = storeWithUpsertMany(store, async (_inputs, write) => {
    // The rebuild has read the card's due (NOW) and computed its write.
    if (!raced) await run.finish();
    raced = true;
    await write();
  });

  await rebuild({ pool: db.pool, redis: redis.redis, store: racing, namespace: redis.namespace }, { carrierId: carrier.id, now: () => NOW + 1_000 });

  assert.ok(raced);
  assert.equal(await dueOf(carrier.id, cardId), run.nextDue, 'the finish’s next due, not the due the rebuild read (checked again at once)');
  assert.equal(await store.laneOf(carrier.id, cardId), 'normal');
  assert.equal(Number(await redis.redis.zscore(store.keys(carrier.id).queue, cardId)), run.nextDue);
});

test('rebuild: a lifecycle write bringing a due time forward while it runs is not moved later by the due time it read', async () => {
  const { carrier, cardId, configId } = await accountWithCard();
  // The card's due in a day under a daily interval; the rebuild starts with that configuration.
  await updatePollingConfig(db.pool, configId, { intervalsSec: { card_status: 86_400 } });
  await store.upsert({ carrierId: carrier.id, cardId, now: NOW, dues: { card_status: NOW + DAY_MS } });
  let raced = false;
  const racing = storeWithUpsertMany(store, async (_inputs, write) => {
    if (!raced) {
      // Meanwhile the interval is cut to 5 minutes and an event applies it to the card.
      await updatePollingConfig(db.pool, configId, { intervalsSec: { card_status: 300 } });
      await service.resync([cardId]);
      assert.equal(await dueOf(carrier.id, cardId), NOW + 300_000, 'the event capped the due at now + the new interval');
    }
    raced = true;
    await write();
  });

  await rebuild({ pool: db.pool, redis: redis.redis, store: racing, namespace: redis.namespace }, { carrierId: carrier.id, now: () => NOW });

  assert.ok(raced);
  assert.equal(await dueOf(carrier.id, cardId), NOW + 300_000, 'not moved back to a day away');
});

test('outbox relay: a finish landing between its read and its write keeps the due time it set', async () => {
  const { carrier, cardId } = await accountWithCard();
  await insertOutboxRows(db.pool, [{ cardId, carrierId: carrier.id }], 0);
  const run = await claimed(carrier.id, cardId);
  let raced = false;
  const racing = storeWithUpsertMany(store, async (_inputs, write) => {
    if (!raced) await run.finish();
    raced = true;
    await write();
  });

  const pass = await relayOutboxOnce(
    { pool: db.pool, store: racing, redis: redis.redis, namespace: redis.namespace, now: () => NOW + 1_000, random: () => 0 },
    { batchSize: 10, retryBaseMs: 1_000, retryMaxMs: 1_000 },
  );

  assert.ok(raced);
  assert.deepEqual([pass.applied, pass.failed], [1, 0]);
  assert.equal(await dueOf(carrier.id, cardId), run.nextDue, 'the finish’s next due, not the due the relay read');
});
