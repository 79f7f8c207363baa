/**
 * A card deleted between its run's preparation and its record, in sync ingest (docs/design.md,
 * 'PostgreSQL and records'): the record's write meets a foreign-key violation on the card, which
 * no retry can cure. The run ends (its record done, the card gone) instead of retrying every
 * minute for ever; in a batch, the card ends as the others do and theirs are recorded. The card is
 * deleted from PostgreSQL right before its finish, injected in the store's finish call. Real
 * Temporal (card worker only, no scheduler), Redis, PostgreSQL and simulator.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, type Stack } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';
import { deleteCard } from '../../src/db/cards.js';
import { listExecutions } from '../../src/db/executions.js';
import { CARD_ID_ATTRIBUTE, CARRIER_ID_ATTRIBUTE } from '../../src/workflow-safe/searchAttributes.js';
import { cardWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import type { CardCheckArgs } from '../../src/workflows/cardCheck.js';
import type { CardBatchArgs } from '../../src/workflows/cardBatch.js';
import type { FinishInput } from '../../src/redis/carrierQueueStore.js';

/** Far more than the record's first retries (1 s, 2 s, 4 s …) yet well inside the test's budget. */
const RUN_ENDS_WITHIN_MS = 20_000;

interface Claimed {
  readonly carrierId: string;
  readonly cards: { cardId: string; token: string; fromPriority: boolean }[];
}

/** `count` cards seeded, due and claimed; the first one is deleted (DELETE /v1/cards/:id) right before its finish. */
async function claimDeletingFirst(stack: Stack, name: string, count: number): Promise<Claimed> {
  const account = await seedAccount(stack, { name, qps: { main: 50 }, typeGroups: { card_status: 'main' }, cards: count, intervalsSec: { card_status: 600 } });
  const carrierId = account.carrier.id;
  const doomed = account.cards[0]!.id;
  const { store } = stack.deps;
  const finish = store.finishWithRun.bind(store);
  store.finishWithRun = async (input: FinishInput, run: string) => {
    if (input.cardId === doomed) await deleteCard(stack.db.pool, input.cardId);
    return finish(input, run);
  };
  for (const card of account.cards) await store.upsert({ carrierId, cardId: card.id, dues: { card_status: Date.now() - 1 } });
  const claim = await store.claim({
    carrierId,
    leaseMs: 60_000,
    inflightLimit: 10,
    priorityRatio: 0,
    tokenPrefix: `${name}.1`,
    typeGroups: {},
    countRealname: false,
  });
  assert.equal(claim.claimed.length, count);
  // The deleted card first, as seeded.
  const cards = account.cards.map((card) => claim.claimed.find((c) => c.cardId === card.id)!);
  return { carrierId, cards: cards.map(({ cardId, token, fromPriority }) => ({ cardId, token, fromPriority })) };
}

/** The run's result, or 'still running' after RUN_ENDS_WITHIN_MS. */
async function endsWithin<T>(result: Promise<T>): Promise<T | 'still running'> {
  return Promise.race([result, new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), RUN_ENDS_WITHIN_MS).unref())]);
}

async function cardGone(stack: Stack, cardId: string): Promise<boolean> {
  const { rows } = await stack.db.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM iot_card WHERE id = $1::bigint', [cardId]);
  return rows[0]?.n === '0';
}

test('cardCheck (sync ingest): a card deleted between prepare and record ends its run', async () => {
  const stack = await createStack('deleted-card-run');
  try {
    const { carrierId, cards } = await claimDeletingFirst(stack, 'deleted1', 1);
    const { cardId, token } = cards[0]!;
    await stack.startWorkers(['card']);
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
    const ended = await endsWithin(handle.result().then((result: { outcome: string }) => result.outcome));
    process.stdout.write(`# run ${(await handle.describe()).status.name} (waited up to ${RUN_ENDS_WITHIN_MS} ms): ${ended}\n`);
    assert.equal(ended, 'success', 'the run ended (the gateway step succeeded; its record is done with the card gone)');
    assert.ok(await cardGone(stack, cardId), 'the card is gone');
  } finally {
    await stack.close();
  }
});

test('cardBatch (sync ingest): a card deleted between prepare and record ends as the others, whose records land', async () => {
  const stack = await createStack('deleted-card-batch', { config: { CARD_RUN_SHAPE: 'batch' } });
  try {
    const { carrierId, cards } = await claimDeletingFirst(stack, 'deleted2', 2);
    await stack.startWorkers(['card']);
    const args: CardBatchArgs = { carrierId, cards, fromPriority: false, taskQueues: stack.taskQueues };
    const handle = await stack.client.workflow.start('cardBatch', {
      workflowId: `${stack.config.WORKFLOW_ID_PREFIX}batch-deleted`,
      taskQueue: stack.taskQueues.card,
      args: [args],
    });
    const ended = await endsWithin(handle.result().then((result: { outcomes: Record<string, number> }) => result.outcomes));
    process.stdout.write(`# run ${(await handle.describe()).status.name} (waited up to ${RUN_ENDS_WITHIN_MS} ms): ${JSON.stringify(ended)}\n`);
    assert.deepEqual(ended, { success: 2 }, 'the batch ended, the deleted card’s record done rather than failed');
    assert.ok(await cardGone(stack, cards[0]!.cardId), 'the card is gone');
    const kept = await listExecutions(stack.db.pool, cards[1]!.cardId);
    assert.equal(kept.length, 1, 'the other card’s record landed');
  } finally {
    await stack.close();
  }
});
