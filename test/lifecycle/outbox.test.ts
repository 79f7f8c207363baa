/**
 * A lifecycle event that reached PostgreSQL but not Redis (Redis failed, or the process died in
 * between) is applied by the outbox relay: the polled card is back in its lane within a bounded
 * time, a card moved between accounts ends in exactly one, and a relay attempt that meets Redis
 * failing is tried again after its backoff.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { Registry } from 'prom-client';
import { createPollingConfig } from '../../src/db/pollingConfigs.js';
import type { Carrier } from '../../src/domain/carrier.js';
import { LifecycleService } from '../../src/lifecycle/service.js';
import type { LifecycleStore } from '../../src/lifecycle/queueStore.js';
import type { LifecycleMetrics } from '../../src/lifecycle/metrics.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { createTestRedis, type TestRedis } from '../../testkit/redis.js';
import { waitFor } from '../../testkit/seed.js';
import { iccid, makeCarrier } from '../db/fixtures.js';
import { typescriptExecArgv } from '../../src/runtime/typescriptChild.js';

let db: TestDb;
let redis: TestRedis;
let store: CarrierQueueStore;
let carrier: Carrier;
let other: Carrier;
/** Relay and reconcile as the control worker runs them, with short periods; started by the tests that need them. */
let convergence: { stop(): Promise<void> } | undefined;
const registry = new Registry();
let metrics: LifecycleMetrics | undefined;
/** Bound on "back in its lane": generous (shared CPU), the relay's period is 100 ms. */
const BOUND_MS = 20_000;

before(async () => {
  db = await createTestDb('outbox');
  redis = await createTestRedis('outbox');
  store = new CarrierQueueStore(redis.redis, redis.namespace);
  carrier = await makeCarrier(db.pool);
  other = await makeCarrier(db.pool);
  await createPollingConfig(db.pool, { name: 'active', match: { cardStatus: 'active' }, intervalsSec: { card_status: 600, carddata: 3600 } });
});
after(async () => {
  await convergence?.stop();
  await redis.close();
  await db.close();
});

/** The store with its writes failing while `fail()` says so (Redis unreachable for this process). */
function failingStore(fail: (method: string) => boolean): LifecycleStore {
  const guard =
    <A extends unknown[], R>(method: string, fn: (...args: A) => Promise<R>) =>
    (...args: A): Promise<R> =>
      fail(method) ? Promise.reject(new Error(`injected: Redis unreachable (${method})`)) : fn(...args);
  return {
    upsert: guard('upsert', store.upsert.bind(store)),
    upsertMany: guard('upsertMany', store.upsertMany.bind(store)),
    remove: guard('remove', store.remove.bind(store)),
    removeMany: guard('removeMany', store.removeMany.bind(store)),
    requestCheck: store.requestCheck.bind(store),
    laneOf: store.laneOf.bind(store),
    clockNow: () => store.clockNow(),
  };
}

function lifecycle(storeUsed: LifecycleStore): LifecycleService {
  return new LifecycleService({ pool: db.pool, store: storeUsed, redis: redis.redis, namespace: redis.namespace, outboxGraceMs: 200, log: () => undefined });
}

/** Starts the relay (and a reconcile too slow to matter here) with the given store. */
async function startRelay(relayStore: LifecycleStore = store): Promise<void> {
  const { keepLifecycleConverged } = await import('../../src/lifecycle/convergenceLoop.js');
  const { createLifecycleMetrics } = await import('../../src/lifecycle/metrics.js');
  await convergence?.stop();
  metrics ??= createLifecycleMetrics(registry, db.pool);
  convergence = keepLifecycleConverged({
    deps: { pool: db.pool, store: relayStore, redis: redis.redis, namespace: redis.namespace },
    metrics,
    relayIntervalMs: 100,
    reconcileIntervalMs: 3_600_000,
    relay: { batchSize: 100, retryBaseMs: 100, retryMaxMs: 400 },
    log: () => undefined,
  });
}

async function outboxRows(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM lifecycle_outbox');
  return rows[0]!.n;
}

async function metricValue(name: string): Promise<number> {
  const metric = registry.getSingleMetric(name);
  return metric ? (await metric.get()).values.reduce((sum, value) => sum + value.value, 0) : 0;
}

test('Redis fails between the PostgreSQL write and the lanes: the polled card is back in its lane within a bounded time', async () => {
  let redisDown = false;
  const service = lifecycle(failingStore(() => redisDown));
  const card = await service.createCard({ iccid: iccid(701), carrierId: carrier.id, status: 'active' });
  await service.disablePolling(card.id);
  assert.equal(await store.laneOf(carrier.id, card.id), null);

  redisDown = true;
  const enabled = await service.enablePolling(card.id);
  assert.equal(enabled.polled, true, 'PostgreSQL has the change');
  assert.equal(await store.laneOf(carrier.id, card.id), null, 'Redis does not (yet)');

  await startRelay();
  const started = Date.now();
  await waitFor('the card back in its lane', async () => (await store.laneOf(carrier.id, card.id)) === 'normal', BOUND_MS, 50);
  process.stdout.write(`# back in its lane ${Date.now() - started} ms after the relay started\n`);
  await waitFor('the outbox emptied', async () => (await outboxRows()) === 0, BOUND_MS, 50);
  assert.ok((await metricValue('cardpoller_lifecycle_outbox_applied_total')) >= 1);
});

test('a card moved between accounts while Redis fails ends in exactly one account', async () => {
  await convergence?.stop();
  convergence = undefined;
  // Redis takes the removal from the old account, then fails: the card is in neither.
  let failUpserts = false;
  const service = lifecycle(failingStore((method) => failUpserts && method.startsWith('upsert')));
  const first = await service.createCard({ iccid: iccid(711), carrierId: carrier.id, status: 'active' });
  // Redis fails entirely: the card is still in the old account only.
  let failAll = false;
  const serviceDown = lifecycle(failingStore(() => failAll));
  const second = await serviceDown.createCard({ iccid: iccid(712), carrierId: carrier.id, status: 'active' });

  failUpserts = true;
  failAll = true;
  await service.changeCarrier(first.id, other.id);
  await serviceDown.changeCarrier(second.id, other.id);
  assert.deepEqual([await store.laneOf(carrier.id, first.id), await store.laneOf(other.id, first.id)], [null, null], 'first: in neither');
  assert.deepEqual([await store.laneOf(carrier.id, second.id), await store.laneOf(other.id, second.id)], ['normal', null], 'second: still in the old one');

  await startRelay();
  for (const card of [first, second]) {
    await waitFor(`card ${card.id} in its new account`, async () => (await store.laneOf(other.id, card.id)) === 'normal', BOUND_MS, 50);
    assert.equal(await store.laneOf(carrier.id, card.id), null, `card ${card.id} is not in the old account`);
  }
  await waitFor('the outbox emptied', async () => (await outboxRows()) === 0, BOUND_MS, 50);
});

test('the relay retries with backoff while Redis keeps failing, and applies the row once it is back', async () => {
  const service = lifecycle(failingStore(() => true));
  const card = await lifecycle(store).createCard({ iccid: iccid(721), carrierId: carrier.id, status: 'active' });
  await lifecycle(store).disablePolling(card.id);
  await service.enablePolling(card.id);
  const failuresBefore = await metricValue('cardpoller_lifecycle_outbox_failures_total');
  // The relay's own Redis fails its first attempts.
  let relayAttempts = 0;
  await startRelay(
    failingStore((method) => {
      if (method === 'upsertMany') relayAttempts += 1;
      return relayAttempts <= 3;
    }),
  );
  await waitFor('the card back in its lane', async () => (await store.laneOf(carrier.id, card.id)) === 'normal', BOUND_MS, 50);
  assert.ok(relayAttempts >= 4, `attempts: ${relayAttempts}`);
  assert.ok((await metricValue('cardpoller_lifecycle_outbox_failures_total')) - failuresBefore >= 3, 'each failed attempt counted');
  await waitFor('the outbox emptied', async () => (await outboxRows()) === 0, BOUND_MS, 50);
});

test('the process dies between the PostgreSQL commit and the Redis write: the card is polled again within a bounded time', async () => {
  await convergence?.stop();
  convergence = undefined;
  const card = await lifecycle(store).createCard({ iccid: iccid(731), carrierId: carrier.id, status: 'active' });
  await lifecycle(store).disablePolling(card.id);
  const child = spawn(process.execPath, [...typescriptExecArgv(), 'test/lifecycle/outboxCrash.ts'], {
    env: { ...process.env, SCHEMA: db.schema, NAMESPACE: redis.namespace, CARD_ID: card.id },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, sig) => resolve(sig)));
  assert.equal(signal, 'SIGKILL', `the child died at the Redis write: ${output}`);
  const { rows } = await db.pool.query<{ enable_polling: boolean }>('SELECT enable_polling FROM iot_card WHERE id = $1', [card.id]);
  assert.equal(rows[0]!.enable_polling, true, 'the PostgreSQL write was committed');
  assert.equal(await store.laneOf(carrier.id, card.id), null, 'the Redis write never happened');

  await startRelay();
  await waitFor('the card back in its lane', async () => (await store.laneOf(carrier.id, card.id)) === 'normal', BOUND_MS, 50);
});
