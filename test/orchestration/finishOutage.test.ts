/**
 * A Redis outage longer than a finish's short retry (20 attempts) does not lose the gateway
 * results of the runs in flight: the finish goes on trying under its lasting policy and the run's
 * records land; past that policy's bound the records land without the finish. In both run shapes.
 * Redis is made to fail for the finish only (the store's finish call, injected), with retry
 * intervals shortened by configuration so the test takes seconds, not the outage's minutes.
 * Real Temporal (card + ingest workers only, no scheduler), Redis, PostgreSQL and simulator.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, type Stack } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';
import { listExecutions } from '../../src/db/executions.js';
import { listCardObservations } from '../../testkit/dbReads.js';
import { CARD_ID_ATTRIBUTE, CARRIER_ID_ATTRIBUTE } from '../../src/workflow-safe/searchAttributes.js';
import { cardWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import type { CardCheckArgs } from '../../src/workflows/cardCheck.js';
import type { CardBatchArgs } from '../../src/workflows/cardBatch.js';
import type { FinishInput } from '../../src/redis/carrierQueueStore.js';

/** Finish attempts that fail before Redis "comes back": more than the short policy's 20. */
const FAILURES = 25;
const CONFIG = { CARD_FINISH_RETRY_INITIAL_MS: 10, CARD_FINISH_RETRY_MAX_INTERVAL_MS: 50, CARD_FINISH_RETRY_TIMEOUT_MS: 4000 };

/** The store's finish fails `failures(cardId)` times per card (Infinity: Redis never back); returns the attempts per card. */
function failFinishes(stack: Stack, failures: (cardId: string) => number): Map<string, number> {
  const attempts = new Map<string, number>();
  const store = stack.deps.store;
  const real = store.finishWithRun.bind(store);
  store.finishWithRun = (input: FinishInput, run: string) => {
    const attempt = (attempts.get(input.cardId) ?? 0) + 1;
    attempts.set(input.cardId, attempt);
    return attempt <= failures(input.cardId) ? Promise.reject(new Error('injected: Redis unreachable (finish)')) : real(input, run);
  };
  return attempts;
}

async function claimAll(stack: Stack, carrierId: string, cardIds: readonly string[]): Promise<{ cardId: string; token: string; fromPriority: boolean }[]> {
  const { store } = stack.deps;
  const dueAt = Date.now() - 1;
  for (const cardId of cardIds) await store.upsert({ carrierId, cardId, dues: { card_status: dueAt } });
  const claim = await store.claim({
    carrierId,
    leaseMs: 60_000,
    inflightLimit: 10,
    priorityRatio: 0,
    tokenPrefix: `outage.${Date.now()}`,
    typeGroups: {},
    countRealname: false,
  });
  assert.equal(claim.claimed.length, cardIds.length);
  return claim.claimed.map((claimed) => ({ cardId: claimed.cardId, token: claimed.token, fromPriority: claimed.fromPriority }));
}

async function seed(stack: Stack, name: string) {
  return seedAccount(stack, {
    name,
    qps: { main: 50 },
    typeGroups: { card_status: 'main' },
    cards: 2,
    intervalsSec: { card_status: 600 },
  });
}

test('cardCheck: a finish failing more than 20 times still ends with the run’s records; past the lasting bound they land without it', async () => {
  const stack = await createStack('finish-outage-card', { config: CONFIG });
  try {
    const account = await seed(stack, 'outage1');
    const carrierId = account.carrier.id;
    const [recovers, never] = account.cards.map((card) => card.id) as [string, string];
    const attempts = failFinishes(stack, (cardId) => (cardId === recovers ? FAILURES : Infinity));
    const claimed = await claimAll(stack, carrierId, [recovers, never]);
    await stack.startWorkers(['card', 'ingest']);
    const results = await Promise.all(
      claimed.map(async ({ cardId, token }) => {
        const args: CardCheckArgs = { carrierId, cardId, token, fromPriority: false, taskQueues: stack.taskQueues };
        const handle = await stack.client.workflow.start('cardCheck', {
          workflowId: cardWorkflowId(cardId, stack.config.WORKFLOW_ID_PREFIX),
          taskQueue: stack.taskQueues.card,
          args: [args],
          typedSearchAttributes: [
            { key: CARD_ID_ATTRIBUTE, value: cardId },
            { key: CARRIER_ID_ATTRIBUTE, value: carrierId },
          ],
        });
        return [cardId, ((await handle.result()) as { outcome: string }).outcome] as const;
      }),
    );
    const outcomes = Object.fromEntries(results);
    process.stdout.write(`# finish attempts: ${JSON.stringify(Object.fromEntries(attempts))}; outcomes ${JSON.stringify(outcomes)}\n`);
    assert.equal(attempts.get(recovers), FAILURES + 1, 'the finish was tried until Redis answered');
    assert.equal(outcomes[recovers], 'success');
    assert.equal(outcomes[never], 'lease_lost', 'past the lasting bound the run ends without its finish');
    assert.ok((attempts.get(never) ?? 0) > 20);

    const recovered = await listExecutions(stack.db.pool, recovers);
    assert.equal(recovered.length, 1, 'the run’s record landed');
    assert.equal(recovered[0]!.outcome, 'success');
    const lost = await listExecutions(stack.db.pool, never);
    assert.equal(lost.length, 1, 'the record landed without the finish');
    const [observation] = await listCardObservations(stack.db.pool, never);
    assert.deepEqual(
      lost[0]!.details?.steps,
      [{ type: 'card_status', outcome: 'success', observationId: observation?.observationId }],
      'with the gateway’s result',
    );
  } finally {
    await stack.close();
  }
});

test('cardBatch: the batch’s finish flush failing more than 20 times still ends with every card’s records', async () => {
  const stack = await createStack('finish-outage-batch', { config: { ...CONFIG, CARD_RUN_SHAPE: 'batch' } });
  try {
    const account = await seed(stack, 'outage2');
    const carrierId = account.carrier.id;
    const cardIds = account.cards.map((card) => card.id);
    // The flush runs each card's finish up to 3 times per attempt: fail more than 20 flush attempts' worth.
    const attempts = failFinishes(stack, () => FAILURES * 3);
    const cards = await claimAll(stack, carrierId, cardIds);
    await stack.startWorkers(['card', 'ingest']);
    const args: CardBatchArgs = { carrierId, cards, fromPriority: false, taskQueues: stack.taskQueues };
    const handle = await stack.client.workflow.start('cardBatch', {
      workflowId: `${stack.config.WORKFLOW_ID_PREFIX}batch-outage`,
      taskQueue: stack.taskQueues.card,
      args: [args],
    });
    const result = (await handle.result()) as { outcomes: Record<string, number> };
    process.stdout.write(`# finish attempts: ${JSON.stringify(Object.fromEntries(attempts))}; outcomes ${JSON.stringify(result.outcomes)}\n`);
    assert.deepEqual(result.outcomes, { success: 2 });
    for (const cardId of cardIds) {
      assert.ok((attempts.get(cardId) ?? 0) > FAILURES * 3 - 3, `card ${cardId}: ${attempts.get(cardId)} attempts`);
      const executions = await listExecutions(stack.db.pool, cardId);
      assert.equal(executions.length, 1, `card ${cardId}: the record landed`);
      assert.equal(executions[0]!.outcome, 'success');
    }
  } finally {
    await stack.close();
  }
});
