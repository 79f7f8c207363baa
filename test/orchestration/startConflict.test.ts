/**
 * A card whose earlier run still runs (its records wait for PostgreSQL, say) cannot start a new
 * run under the same workflow id. Its claim is given back with a delay instead of being claimed
 * and released again every round, in both start modes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl, schedulerStatus } from '../../src/app/temporalControl.js';
import { FAILED_START_RETRY_MS } from '../../src/workflow-safe/claimRound.js';
import { cardWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import type { Config } from '../../src/config/index.js';

for (const mode of ['child', 'client'] as const) {
  test(`CARD_START_MODE=${mode}: a card whose earlier run still runs waits before it is claimed again`, async (t) => {
    const config: Partial<Config> = { CARD_START_MODE: mode };
    const stack = await createStack(`start-conflict-${mode}`, { config });
    try {
      const account = await seedAccount(stack, {
        name: `conflict-${mode}`,
        qps: { main: 20 },
        typeGroups: { card_status: 'main' },
        cards: 2,
        intervalsSec: { card_status: 600 },
      });
      const [blocked, free] = account.cards;
      assert.ok(blocked && free);
      // The "earlier run": a run under the card's workflow id on a queue no worker polls, so it stays running.
      const earlier = await stack.client.workflow.start('cardCheck', {
        taskQueue: `${stack.taskQueues.card}-nobody`,
        workflowId: cardWorkflowId(blocked.id, stack.config.WORKFLOW_ID_PREFIX),
        args: [],
      });
      try {
        const now = Date.now();
        await stack.deps.store.upsertMany(account.cards.map((card) => ({ carrierId: account.carrier.id, cardId: card.id, dues: { card_status: now } })));
        await stack.startWorkers();
        const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
        await ensurePollingControl(ref, { reconcileEveryMs: 2000 });
        await waitFor(
          'the free card checked',
          async () =>
            Number((await stack.db.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM card_execution WHERE card_id = $1', [free.id])).rows[0]?.n) >= 1,
          30_000,
        );
        const failedAt = Date.now();
        // Eight one-second ticks: claimed and released every other tick before, at most once now.
        await new Promise((resolve) => setTimeout(resolve, 8_000));
        const status = await schedulerStatus(ref, account.carrier.id);
        t.diagnostic(`start failures after 8 s: ${status.startFailures}`);
        assert.ok(status.startFailures >= 1, 'the start conflict happened');
        assert.ok(status.startFailures <= 1, `claimed again ${status.startFailures} times within 8 s`);
        // The card waits in its lane until the retry time, not at "now".
        const score = Number(await stack.deps.redis.zscore(stack.deps.store.keys(account.carrier.id).queue, blocked.id));
        assert.ok(score > failedAt, `lane score ${score} is in the future of ${failedAt}`);
        assert.ok(score <= Date.now() + FAILED_START_RETRY_MS);
      } finally {
        await earlier.terminate('test over').catch(() => undefined);
      }
      // Once the earlier run is gone, the card is checked after its retry delay.
      await waitFor(
        'the blocked card checked after the earlier run ended',
        async () =>
          Number((await stack.db.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM card_execution WHERE card_id = $1', [blocked.id])).rows[0]?.n) >= 1,
        FAILED_START_RETRY_MS + 20_000,
      );
    } finally {
      await stack.close();
    }
  });
}
