/**
 * Redis lost its data under a running system (flushed, or failed over to an empty replica): the
 * control loop notices the missing rebuild marker and rebuilds every lane from PostgreSQL. Only
 * this test's namespace is wiped, so other tests sharing the Redis are untouched.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';

test('Redis emptied while running: the system notices, rebuilds from PostgreSQL and keeps polling', async (t) => {
  const stack = await createStack('redis-flush');
  try {
    const account = await seedAccount(stack, {
      name: 'flush1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 5,
      intervalsSec: { card_status: 2 },
    });
    const carrierId = account.carrier.id;
    await stack.startWorkers();
    const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref, { reconcileEveryMs: 2000 });
    await waitFor(
      'an execution of every card',
      async () => Number((await stack.db.pool.query<{ n: string }>('SELECT count(DISTINCT card_id)::text AS n FROM card_execution')).rows[0]?.n) === 5,
      30_000,
    );

    // Everything of this deployment's namespace is gone, as after FLUSHALL.
    const keys = await stack.deps.redis.keys(`${stack.redis.namespace}*`);
    assert.ok(keys.length > 0);
    await stack.deps.redis.del(...keys);
    const flushedAt = new Date();
    t.diagnostic(`deleted ${keys.length} keys`);

    const restored = await waitFor(
      'every card back in a lane',
      async () => {
        const lanes = await Promise.all(account.cards.map((card) => stack.deps.store.laneOf(carrierId, card.id)));
        return lanes.every((lane) => lane !== null) ? lanes : undefined;
      },
      20_000,
    );
    t.diagnostic(`restored after ${((Date.now() - flushedAt.getTime()) / 1000).toFixed(1)} s: ${restored.join(',')}`);
    await waitFor(
      'every card executed after the rebuild',
      async () =>
        Number(
          (
            await stack.db.pool.query<{ n: string }>(
              "SELECT count(DISTINCT card_id)::text AS n FROM card_execution WHERE outcome = 'success' AND started_at > $1",
              [flushedAt],
            )
          ).rows[0]?.n,
        ) === 5,
      30_000,
    );
  } finally {
    await stack.close();
  }
});
