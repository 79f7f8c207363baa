/**
 * A claim loop activity (SCHEDULER_LOOP=activity) whose account sleeps (lua/markIdle.lua) is woken
 * by its priority lane before the mark's end; the round that claims the requested card must not
 * leave the mark standing, or the card's next due (a confirmation re-check a second later) waits
 * out the rest of the sleep: only a round that claims nothing marks the account again. Seen under
 * load in the suite as 'timed out … waiting for offline observed' (test/orchestration/requestCheck.test.ts):
 * the mark had 55 s left while the re-check was due. Here the sleep is forced, so the outcome does
 * not depend on timing: the test waits 20 s for checks 1 s apart.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl, type OrchestrationRef } from '../../src/app/temporalControl.js';
import { serveRequestCheck } from '../../src/app/requestCheckService.js';
import { accountKeys } from '../../src/redis/keys.js';

const executionsOf = async (pool: { query: (sql: string, params: unknown[]) => Promise<{ rows: { n: string }[] }> }, cardId: string): Promise<number> =>
  Number((await pool.query('SELECT count(*)::text AS n FROM card_execution WHERE card_id = $1::bigint', [cardId])).rows[0]?.n ?? 0);

test('claim loop: a request that wakes a sleeping account clears its sleep, so the card’s re-checks a second apart run', async (t) => {
  const stack = await createStack('orch-idle-wake', { config: { SCHEDULER_LOOP: 'activity' } });
  try {
    const account = await seedAccount(stack, {
      name: 'iw1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 1,
      intervalsSec: { card_status: 3600 },
    });
    const carrierId = account.carrier.id;
    const card = account.cards[0];
    assert.ok(card);
    await stack.deps.store.upsertMany([{ carrierId, cardId: card.id, dues: { card_status: Date.now() + 3_600_000 } }]);
    await stack.startWorkers();
    const ref: OrchestrationRef = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref);
    await waitFor('the claim loop', async () => (await stack.deps.store.loopView(carrierId)) !== null, 60_000);
    // Asleep for a minute, as after a round that found nothing.
    const idleKey = accountKeys(stack.redis.namespace, carrierId).idle;
    await stack.deps.redis.set(idleKey, String(Date.now() + 60_000), 'PX', 120_000);

    // Re-checked 1 s after each check until 'offline' is seen (the card stays online): three checks.
    const result = await serveRequestCheck(
      ref,
      stack.services.requests,
      carrierId,
      { cardId: card.id, types: ['card_status'], confirmDelaysSec: [1, 1], expected: 'offline', actor: 'test' },
      { wake: false },
    );
    assert.equal(result.status, 'requested');
    const checks = await waitFor(
      'three checks of the card',
      async () => ((await executionsOf(stack.db.pool, card.id)) >= 3 ? executionsOf(stack.db.pool, card.id) : undefined),
      20_000,
    );
    t.diagnostic(`checks: ${checks}; idle mark now: ${String(await stack.deps.redis.get(idleKey))}`);
  } finally {
    await stack.close();
  }
});
