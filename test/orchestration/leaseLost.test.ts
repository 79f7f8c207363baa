/**
 * A lost lease (docs/design.md, 'cardCheck', step 4): a cardCheck whose lease is lost between two
 * steps keeps what the finished step learned: `ok:t` in Redis (through finish's stale path, leaving
 * the new owner's claim and lane alone) and the observation in the durable record, whose outcome is
 * `lease_lost`. Real Temporal (card + ingest workers only, no scheduler), Redis, PostgreSQL and
 * simulator.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { listCardObservations } from '../../testkit/dbReads.js';
import { listExecutions } from '../../src/db/executions.js';
import { CARD_ID_ATTRIBUTE, CARRIER_ID_ATTRIBUTE } from '../../src/workflow-safe/searchAttributes.js';
import { cardWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import type { CardCheckArgs } from '../../src/workflows/cardCheck.js';

test('lease lost after the first step: its ok:t and observation are kept, the next step is not called, the new owner is untouched', async () => {
  const stack = await createStack('lease-lost');
  try {
    // Slow calls, so the claim can be taken over while the first step is at the carrier.
    const account = await seedAccount(stack, {
      name: 'lost1',
      qps: { main: 50 },
      typeGroups: { card_status: 'main', carddata: 'main' },
      cards: 1,
      intervalsSec: { card_status: 600, carddata: 600 },
      simulator: { latencyMs: { p50: 1500, p99: 1500 } },
    });
    const carrierId = account.carrier.id;
    const card = account.cards[0]!;
    const { store, redis } = stack.deps;
    const keys = store.keys(carrierId);
    const dueAt = Date.now() - 1;
    await store.upsert({ carrierId, cardId: card.id, dues: { card_status: dueAt, carddata: dueAt } });
    const claim = await store.claim({
      carrierId,
      leaseMs: 20_000,
      inflightLimit: 10,
      priorityRatio: 0,
      tokenPrefix: 'lost.1',
      typeGroups: {},
      countRealname: false,
    });
    const token = claim.claimed[0]!.token;

    await stack.startWorkers(['card', 'ingest']);
    const args: CardCheckArgs = { carrierId, cardId: card.id, token, fromPriority: false, taskQueues: stack.taskQueues };
    const handle = await stack.client.workflow.start('cardCheck', {
      workflowId: cardWorkflowId(card.id, stack.config.WORKFLOW_ID_PREFIX),
      taskQueue: stack.taskQueues.card,
      args: [args],
      typedSearchAttributes: [
        { key: CARD_ID_ATTRIBUTE, value: card.id },
        { key: CARRIER_ID_ATTRIBUTE, value: carrierId },
      ],
    });
    const callsAt = async (): Promise<number> => (await stack.simulator.stats()).cards?.[card.iccid]?.calls ?? 0;
    await waitFor('the first step at the carrier', async () => (await callsAt()) === 1, 20_000, 10);

    // The lease runs out and another claim round takes the card: new token, running entry, lane score.
    const takenAt = Date.now();
    const thief = `lost.2@${takenAt}:${card.id}`;
    await redis
      .multi()
      .set(keys.claim(card.id), thief)
      .zrem(keys.running, token)
      .zadd(keys.running, takenAt + 20_000, thief)
      .zadd(keys.queue, takenAt + 20_000, card.id)
      .exec();

    assert.deepEqual(await handle.result(), { outcome: 'lease_lost' });
    assert.equal(await callsAt(), 1, 'the second step was not called');

    const state = await store.readDue(carrierId, card.id);
    assert.ok((state?.types.card_status.ok ?? 0) >= takenAt - 2_000, `ok:card_status written (${state?.types.card_status.ok})`);
    assert.equal(state?.types.carddata.ok, null, 'carddata never ran');
    assert.ok((state?.types.carddata.due ?? Infinity) <= takenAt, 'carddata still due for the new owner');
    assert.ok((state?.types.card_status.due ?? Infinity) <= dueAt, 'a stale finish moves no due later');
    assert.equal(await redis.get(keys.claim(card.id)), thief, "the new owner's claim is kept");
    assert.equal(Number(await redis.zscore(keys.running, thief)), takenAt + 20_000);
    assert.equal(Number(await redis.zscore(keys.queue, card.id)), takenAt + 20_000, 'lane score untouched');

    const executions = await waitFor(
      'the execution record',
      async () => {
        const rows = await listExecutions(stack.db.pool, card.id);
        return rows.length > 0 ? rows : undefined;
      },
      10_000,
    );
    assert.equal(executions.length, 1);
    assert.equal(executions[0]?.outcome, 'aborted');
    assert.deepEqual(executions[0]?.details?.steps, [{ type: 'card_status', outcome: 'success' }]);
    const observations = await listCardObservations(stack.db.pool, card.id);
    assert.deepEqual(
      observations.map((o) => o.type),
      ['card_status'],
    );
  } finally {
    await stack.close();
  }
});
