/**
 * A card deleted between its run's preparation and its record, in sync ingest (docs/design.md,
 * 'PostgreSQL and records'): the record's write meets a foreign-key violation on the card, which
 * no retry can cure. The run ends (its record done, the card gone) instead of retrying every
 * minute for ever. The card is deleted from PostgreSQL right before the run's finish, injected in
 * the store's finish call. Real Temporal (card worker only, no scheduler), Redis, PostgreSQL and simulator.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';
import { deleteCard } from '../../src/db/cards.js';
import { CARD_ID_ATTRIBUTE, CARRIER_ID_ATTRIBUTE } from '../../src/workflow-safe/searchAttributes.js';
import { cardWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import type { CardCheckArgs } from '../../src/workflows/cardCheck.js';
import type { FinishInput } from '../../src/redis/carrierQueueStore.js';

/** Far more than the record's first retries (1 s, 2 s, 4 s …) yet well inside the test's budget. */
const RUN_ENDS_WITHIN_MS = 20_000;

test('cardCheck (sync ingest): a card deleted between prepare and record ends its run', async () => {
  const stack = await createStack('deleted-card-run');
  try {
    const account = await seedAccount(stack, {
      name: 'deleted1',
      qps: { main: 50 },
      typeGroups: { card_status: 'main' },
      cards: 1,
      intervalsSec: { card_status: 600 },
    });
    const carrierId = account.carrier.id;
    const cardId = account.cards[0]!.id;
    const { store } = stack.deps;
    // DELETE /v1/cards/:id lands after the gateway step, before the finish and the record.
    const finish = store.finishWithRecord.bind(store);
    store.finishWithRecord = async (input: FinishInput) => {
      await deleteCard(stack.db.pool, input.cardId);
      return finish(input);
    };
    await store.upsert({ carrierId, cardId, dues: { card_status: Date.now() - 1 } });
    const claim = await store.claim({
      carrierId,
      leaseMs: 60_000,
      inflightLimit: 10,
      priorityRatio: 0,
      tokenPrefix: 'deleted.1',
      typeGroups: {},
      countRealname: false,
    });
    const token = claim.claimed[0]!.token;
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
    const ended = await Promise.race([
      handle.result().then((result: { outcome: string }) => result.outcome),
      new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), RUN_ENDS_WITHIN_MS).unref()),
    ]);
    const description = await handle.describe();
    process.stdout.write(`# run ${description.status.name} (waited up to ${RUN_ENDS_WITHIN_MS} ms): ${ended}\n`);
    assert.equal(ended, 'success', `the run ended (the gateway step succeeded; its record is done with the card gone)`);
    const { rows } = await stack.db.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM iot_card WHERE id = $1::bigint', [cardId]);
    assert.equal(rows[0]?.n, '0', 'the card is gone');
  } finally {
    await stack.close();
  }
});
