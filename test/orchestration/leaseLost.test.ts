/**
 * A lost lease (docs/design.md, 'cardCheck', step 4): a card execution whose lease is lost between two steps keeps what the
 * finished step learned: `ok:t` in Redis (through finish's stale path, leaving the new owner's
 * claim and lane alone) and the observation in the durable record, whose outcome is `lease_lost`.
 * The activities of one execution called in order, as cardCheck calls them, over real Redis,
 * PostgreSQL and the gateway simulator (no Temporal). What the workflow decides — no step after a
 * lost lease, the completed ones finished as stale, the record `lease_lost` — is
 * test/workflows/cardCheck.test.ts ('lease lost after a step').
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createStack, stackCardActivities } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';
import { createGatewayActivities } from '../../src/activities/gateway.js';
import { createIngestActivities } from '../../src/activities/ingest.js';
import { listCardObservations } from '../../testkit/dbReads.js';
import { listExecutions } from '../../src/db/executions.js';
import type { FinishInput, GatewayStepInput } from '../../src/workflow-safe/cardRun.js';
import type { GatewayCheckType } from '../../src/workflow-safe/checkTypes.js';

test('lease lost after the first step: the next step finds it gone (no call), ok:t and the observation are kept, the new owner is untouched', async () => {
  const stack = await createStack('lease-lost');
  try {
    const account = await seedAccount(stack, {
      name: 'lost1',
      qps: { main: 50 },
      typeGroups: { card_status: 'main', carddata: 'main' },
      cards: 1,
      intervalsSec: { card_status: 600, carddata: 600 },
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
    const executorId = 'run-1';
    const cardActivities = stackCardActivities(stack);
    const gateway = createGatewayActivities({ client: stack.deps.gateway, limiter: stack.deps.limiter, store });
    const plan = await cardActivities.prepareExecution({ carrierId, cardId: card.id, token, executorId, fromPriority: false });
    if (plan.kind !== 'run') assert.fail(`prepare answered ${plan.kind}`);
    assert.deepEqual(plan.types, ['card_status', 'carddata']);
    const startedAt = Date.now();
    const step = (type: GatewayCheckType): GatewayStepInput => ({
      carrierId,
      cardId: card.id,
      token,
      executorId,
      leaseMs: plan.leaseMs,
      gatewayAccount: plan.gatewayAccount,
      iccid: plan.iccid,
      type,
      group: plan.typeGroups[type],
      deadlineMs: startedAt + plan.totalTimeoutMs,
    });
    // A gateway step runs in its activity's context (its cancellation reaches the call).
    const inActivity = <R>(fn: () => Promise<R>): Promise<R> =>
      new MockActivityEnvironment({}, { logger: new DefaultLogger('ERROR') }).run<[], R, () => Promise<R>>(fn);
    const callsAt = async (): Promise<number> => (await stack.simulator.stats()).cards?.[card.iccid]?.calls ?? 0;

    const first = await inActivity(() => gateway.checkGateway(step('card_status')));
    assert.ok(first !== 'lease_lost' && first.outcome === 'success', JSON.stringify(first));
    assert.equal(await callsAt(), 1);

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

    assert.equal(await inActivity(() => gateway.checkGateway(step('carddata'))), 'lease_lost');
    assert.equal(await callsAt(), 1, 'the second step was not called');

    const finishInput: FinishInput = {
      carrierId,
      cardId: card.id,
      token,
      plan,
      results: [first],
      startedAt,
      fromPriority: false,
      workflowId: 'card-lost',
      runId: executorId,
    };
    const finished = await cardActivities.finishExecution({ ...finishInput, leaseLost: true });
    assert.equal(finished.owned, false);

    const state = await store.readDue(carrierId, card.id);
    assert.ok((state?.types.card_status.ok ?? 0) >= takenAt - 2_000, `ok:card_status written (${state?.types.card_status.ok})`);
    assert.equal(state?.types.carddata.ok, null, 'carddata never ran');
    assert.ok((state?.types.carddata.due ?? Infinity) <= takenAt, 'carddata still due for the new owner');
    assert.ok((state?.types.card_status.due ?? Infinity) <= dueAt, 'a stale finish moves no due later');
    assert.equal(await redis.get(keys.claim(card.id)), thief, "the new owner's claim is kept");
    assert.equal(Number(await redis.zscore(keys.running, thief)), takenAt + 20_000);
    assert.equal(Number(await redis.zscore(keys.queue, card.id)), takenAt + 20_000, 'lane score untouched');

    // The record cardCheck writes for it (sync ingest).
    const ingest = createIngestActivities({ pool: stack.deps.pool, priority: stack.services.priority });
    await ingest.recordExecution({ ...finishInput, results: finished.results, outcome: 'lease_lost', owned: false, typeFinishes: finished.typeFinishes });
    const executions = await listExecutions(stack.db.pool, card.id);
    assert.equal(executions.length, 1);
    assert.equal(executions[0]?.outcome, 'aborted');
    const observations = await listCardObservations(stack.db.pool, card.id);
    assert.deepEqual(
      observations.map((o) => o.type),
      ['card_status'],
    );
    assert.deepEqual(executions[0]?.details?.steps, [{ type: 'card_status', outcome: 'success', observationId: observations[0]?.observationId }]);
  } finally {
    await stack.close();
  }
});
