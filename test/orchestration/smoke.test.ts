import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';

test('orchestration: cards are claimed, checked through the simulator, finished and recorded', async () => {
  const stack = await createStack('orch-smoke');
  try {
    const account = await seedAccount(stack, {
      name: 'acct1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main', carddata: 'main' },
      cards: 5,
      intervalsSec: { card_status: 3, carddata: 6 },
    });
    const workers = await stack.startWorkers();
    const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref, { reconcileEveryMs: 2000 });
    const executions = await waitFor(
      'two executions of every card',
      async () => {
        const { rows } = await stack.db.pool.query<{ card_id: string; n: string }>(
          'SELECT card_id::text, count(*)::text AS n FROM card_execution GROUP BY card_id',
        );
        return rows.length === account.cards.length && rows.every((r) => Number(r.n) >= 2) ? rows : undefined;
      },
      30_000,
    );
    assert.equal(executions.length, 5);
    const stats = await stack.simulator.stats();
    const group = stats.accounts['acct1-gw']?.groups.main;
    assert.ok(group && group.calls >= 10, `simulator saw ${group?.calls} calls`);
    assert.equal(group?.rejected, 0);
    const { rows: outcomes } = await stack.db.pool.query<{ outcome: string }>('SELECT DISTINCT outcome FROM card_execution');
    assert.deepEqual(
      outcomes.map((r) => r.outcome),
      ['success'],
    );
    await workers.stop();
  } finally {
    await stack.close();
  }
});
