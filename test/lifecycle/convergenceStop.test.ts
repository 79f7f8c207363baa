/**
 * Stopping the lifecycle convergence loops while a pass is in flight: stop() waits for that pass,
 * and then for nothing more — not for the loop's next period (the reconcile's is a minute; `npm
 * start` stops only once these loops have).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type pg from 'pg';
import { keepLifecycleConverged } from '../../src/lifecycle/convergenceLoop.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { createTestRedis, type TestRedis } from '../../testkit/redis.js';

let db: TestDb;
let redis: TestRedis;
/** Far longer than the test waits: a stop that waits out a period never resolves in time. */
const PERIOD_MS = 3_600_000;
/** How long the test gives stop() once the pass in flight has ended. */
const STOP_BOUND_MS = 10_000;

before(async () => {
  db = await createTestDb('convergencestop');
  redis = await createTestRedis('convergencestop');
});
after(async () => {
  await redis.close();
  await db.close();
});

/** The real pool, whose queries wait at a gate while it is closed; `entered` resolves at the first one held. */
function gatedPool(pool: pg.Pool): { pool: pg.Pool; entered: Promise<void>; open(): void } {
  let open = (): void => undefined;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let entered = (): void => undefined;
  const enteredPromise = new Promise<void>((resolve) => (entered = resolve));
  const gated = new Proxy(pool, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if ((property !== 'query' && property !== 'connect') || typeof value !== 'function') return value;
      return async (...args: unknown[]): Promise<unknown> => {
        entered();
        await gate;
        return (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      };
    },
  });
  return { pool: gated, entered: enteredPromise, open };
}

test('stop() during the outbox relay pass resolves once the pass ends, without waiting for the next period', async () => {
  const gated = gatedPool(db.pool);
  const loops = keepLifecycleConverged({
    deps: { pool: gated.pool, store: new CarrierQueueStore(redis.redis, redis.namespace), redis: redis.redis, namespace: redis.namespace },
    relayIntervalMs: PERIOD_MS,
    reconcileIntervalMs: PERIOD_MS,
    relay: { batchSize: 100, retryBaseMs: 100, retryMaxMs: 400 },
    log: () => undefined,
  });
  // The relay's first pass runs at once and is now held at its first query.
  await gated.entered;
  const stopped = loops.stop().then(() => 'stopped' as const);
  gated.open();
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([stopped, new Promise<'still waiting'>((resolve) => (timer = setTimeout(() => resolve('still waiting'), STOP_BOUND_MS)))]);
  clearTimeout(timer);
  assert.equal(outcome, 'stopped', `stop() had not resolved ${STOP_BOUND_MS} ms after the pass in flight ended (relay period ${PERIOD_MS} ms)`);
});
