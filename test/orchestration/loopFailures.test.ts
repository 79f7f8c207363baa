/**
 * The loops outlive their activities (issue: an outage of Redis or PostgreSQL must not stop
 * polling for good). Faults are injected into this test's own Redis namespace and PostgreSQL
 * schema only, so other tests sharing the services are untouched.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl, schedulerStatus } from '../../src/app/temporalControl.js';
import { schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { requestCheckSignal } from '../../src/workflows/messages.js';

test(
  'carrierScheduler: claim failures for longer than its retries and a signal request-check during them; the loop ' + 'keeps going and the request is served',
  async (t) => {
    const stack = await createStack('loop-failures');
    try {
      const account = await seedAccount(stack, {
        name: 'loop1',
        qps: { main: 20 },
        typeGroups: { card_status: 'main' },
        cards: 4,
        intervalsSec: { card_status: 2 },
      });
      const carrierId = account.carrier.id;
      await stack.startWorkers();
      const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
      await ensurePollingControl(ref, { reconcileEveryMs: 2000 });
      const executions = async (): Promise<number> =>
        Number((await stack.db.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM card_execution')).rows[0]?.n);
      await waitFor('executions before the fault', async () => (await executions()) >= 4, 30_000);

      // Fault: the account's running set is not a sorted set any more — every claim round fails in Redis.
      const running = stack.deps.store.keys(carrierId).running;
      const saved = await stack.deps.redis.zrange(running, 0, -1, 'WITHSCORES');
      await stack.deps.redis.del(running);
      await stack.deps.redis.set(running, 'not-a-zset');
      // And the priority-item table is away: a signal request-check fails in PostgreSQL.
      await stack.db.pool.query('ALTER TABLE polling_priority_item RENAME TO polling_priority_item_away');
      const card = account.cards[0];
      assert.ok(card);
      const scheduler = stack.client.workflow.getHandle(schedulerWorkflowId(carrierId, stack.config.WORKFLOW_ID_PREFIX));
      await scheduler.signal(requestCheckSignal, { cardId: card.id, types: ['card_status'], lane: 'priority', actor: 'test' });
      // Longer than the claim's own retries took to fail the scheduler before (it was FAILED after 30 s).
      await new Promise((resolve) => setTimeout(resolve, 30_000));
      const scheduler0 = await scheduler.describe();
      assert.equal(scheduler0.status.name, 'RUNNING', 'the scheduler outlived the failing claims');
      const during = await schedulerStatus(ref, carrierId);
      t.diagnostic(`during the fault: mode ${during.mode}, last failure ${JSON.stringify(during.lastFailure)}`);
      assert.equal(during.mode, 'degraded');
      assert.ok(during.lastFailure && during.lastFailure.consecutive >= 2, JSON.stringify(during.lastFailure));

      // Repair both; the loop must resume by itself.
      await stack.deps.redis.del(running);
      if (saved.length > 0) await stack.deps.redis.zadd(running, ...saved);
      await stack.db.pool.query('ALTER TABLE polling_priority_item_away RENAME TO polling_priority_item');
      const repairedAt = new Date();
      const description = await scheduler.describe();
      assert.equal(description.status.name, 'RUNNING');
      await waitFor(
        'executions after the repair',
        async () =>
          Number((await stack.db.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM card_execution WHERE started_at > $1', [repairedAt])).rows[0]?.n) >=
          4,
        40_000,
      );
      // The signal taken off the queue during the fault was not lost: its priority item exists and was served.
      const item = await waitFor(
        'the signalled request-check to be served',
        async () => {
          const { rows } = await stack.db.pool.query<{ status: string }>('SELECT status FROM polling_priority_item WHERE card_id = $1', [card.id]);
          return rows.find((row) => row.status === 'completed');
        },
        40_000,
      );
      assert.equal(item.status, 'completed');
      const after = await schedulerStatus(ref, carrierId);
      assert.equal(after.mode, 'claiming');
      assert.equal(after.lastFailure?.consecutive, 0);
    } finally {
      await stack.close();
    }
  },
);
