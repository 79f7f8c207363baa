/**
 * Every priority item ends terminal or has a next run that someone serves: an item sent back to
 * `pending` by a retryable failure is requested again when its retry is due, and completes once
 * the carrier answers again.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl, requestCheck } from '../../src/app/temporalControl.js';

interface ItemRow {
  status: string;
  attempt_count: number;
  next_run_at: Date | null;
}

test('priority item after a retryable failure: requested again when due, completed once the gateway answers', async (t) => {
  const stack = await createStack('priority-retry');
  try {
    // Intervals long enough that no regular execution of the card comes by during the test.
    const account = await seedAccount(stack, {
      name: 'prio1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 2,
      intervalsSec: { card_status: 3600 },
    });
    const card = account.cards[0];
    assert.ok(card);
    const gatewayAccount = 'prio1-gw';
    await stack.simulator.updateAccount(gatewayAccount, { errorRate: 1 });
    await stack.startWorkers();
    const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref, { reconcileEveryMs: 2000 });
    const item = async (): Promise<ItemRow | undefined> =>
      (
        await stack.db.pool.query<ItemRow>('SELECT status, attempt_count, next_run_at FROM polling_priority_item WHERE card_id = $1 ORDER BY id DESC LIMIT 1', [
          card.id,
        ])
      ).rows[0];

    const requested = await waitFor(
      'the scheduler to accept the request',
      async () => requestCheck(ref, account.carrier.id, { cardId: card.id, types: ['card_status'] }).catch(() => undefined),
      20_000,
    );
    assert.equal(requested.status, 'requested');
    const failed = await waitFor(
      'the first attempt to fail retryably',
      async () => {
        const row = await item();
        return row && row.status === 'pending' && row.attempt_count >= 1 && row.next_run_at !== null ? row : undefined;
      },
      30_000,
    );
    t.diagnostic(`after the failed attempt: ${JSON.stringify(failed)}`);

    await stack.simulator.updateAccount(gatewayAccount, { errorRate: 0 });
    const done = await waitFor(
      'the item to be served again and complete',
      async () => {
        const row = await item();
        return row && row.status === 'completed' ? row : undefined;
      },
      40_000,
    );
    assert.ok(done.attempt_count >= 2, `attempts: ${done.attempt_count}`);
  } finally {
    await stack.close();
  }
});
