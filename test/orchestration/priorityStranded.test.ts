/**
 * A priority item left `processing` by an execution that died after claiming it (a killed card
 * worker, a run that threw before its record): its Redis request is spent, so no run of the card
 * claims it again. The account's retry sweep returns it to pending once its claim outlived the
 * account's lease, requests it again, and a run completes it (docs/design.md, 'Request-check and
 * priority items'). The whole system on real Temporal, Redis, PostgreSQL and the simulator.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { listAudit } from '../../testkit/dbReads.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { claimPriorityItem, requestPriorityItem } from '../../src/db/priorityItems.js';

interface ItemRow {
  status: string;
  attempt_count: number;
}

test('a processing priority item whose execution died is returned by the retry sweep and completed', async (t) => {
  const stack = await createStack('priority-stranded');
  try {
    // Intervals long enough that the card's regular executions leave the item alone (they claim
    // it only when requested), and a lease of 20 s (seedAccount).
    const account = await seedAccount(stack, {
      name: 'strand1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 1,
      intervalsSec: { card_status: 3600 },
    });
    const card = account.cards[0]!;
    const { item } = await requestPriorityItem(stack.db.pool, { cardId: card.id, types: ['card_status'], actor: 'ops', source: 'api' });
    // Claimed by an execution 25 s ago that never finished it; no request of the card in Redis.
    const claimed = await claimPriorityItem(stack.db.pool, { cardId: card.id, token: 'dead.1', leaseMs: 20_000, now: new Date(Date.now() - 25_000) });
    assert.equal(claimed.status, 'claimed');

    await stack.startWorkers();
    await ensurePollingControl(
      { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX },
      { reconcileEveryMs: 2000 },
    );
    const row = async (): Promise<ItemRow | undefined> =>
      (await stack.db.pool.query<ItemRow>('SELECT status, attempt_count FROM polling_priority_item WHERE id = $1::bigint', [item.id])).rows[0];
    const done = await waitFor(
      'the stranded item to be returned, requested again and completed',
      async () => {
        const now = await row();
        return now?.status === 'completed' ? now : undefined;
      },
      45_000,
    ).catch(async (error: unknown) => {
      t.diagnostic(`item after the wait: ${JSON.stringify(await row())}`);
      throw error;
    });
    assert.equal(done.attempt_count, 2, 'the dead attempt and the one that completed it');
    const actions = (await listAudit(stack.db.pool, 'polling_priority_item', item.id)).map((a) => a.action);
    t.diagnostic(`audit: ${actions.join(' → ')}`);
    assert.deepEqual(actions.slice(0, 3), ['created', 'claimed', 'lease_expired']);
    assert.equal(actions.at(-1), 'completed');
  } finally {
    await stack.close();
  }
});
