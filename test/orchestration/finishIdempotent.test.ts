/**
 * A retried finish (docs/design.md, 'Finish rules': idempotent): `finishExecution` is a retried
 * local activity. A retry that comes after the first attempt's Redis finish landed must return what
 * the first attempt returned — not recompute from the updated due hash (failure streak counted
 * twice, recovery lost, `owned` false). Real Redis and PostgreSQL, no workers: the activities are
 * called directly.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackCardActivities, type Stack } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';
import type { CardActivities } from '../../src/activities/card.js';
import { createIngestActivities } from '../../src/activities/ingest.js';
import { recordFailure } from '../../src/db/alerts.js';
import { DueField } from '../../src/redis/dueFields.js';
import type { CheckType } from '../../src/workflow-safe/checkTypes.js';
import type { ExecutionPlanRun, FinishInput, StepResult } from '../../src/workflow-safe/cardRun.js';

interface Running {
  readonly carrierId: string;
  readonly cardId: string;
  readonly token: string;
  readonly activities: CardActivities;
  readonly input: (results: StepResult[]) => FinishInput;
}

/** One card of a fresh account, due for `types`, claimed and prepared as a cardCheck run would. */
async function prepared(stack: Stack, name: string, types: readonly CheckType[]): Promise<Running> {
  const account = await seedAccount(stack, {
    name,
    qps: { main: 50 },
    typeGroups: { card_status: 'main', carddata: 'main' },
    cards: 1,
    intervalsSec: Object.fromEntries(types.map((t) => [t, 600])),
  });
  const carrierId = account.carrier.id;
  const cardId = account.cards[0]!.id;
  const now = Date.now();
  await stack.deps.store.upsert({ carrierId, cardId, dues: Object.fromEntries(types.map((t) => [t, now - 1])) });
  const claim = await stack.deps.store.claim({
    carrierId,
    leaseMs: 60_000,
    inflightLimit: 10,
    priorityRatio: 0,
    tokenPrefix: `${name}.1`,
    typeGroups: {},
    countRealname: false,
  });
  const token = claim.claimed[0]!.token;
  const activities = stackCardActivities(stack);
  const plan = await activities.prepareExecution({ carrierId, cardId, token, executorId: 'run-1', fromPriority: false });
  if (plan.kind !== 'run') assert.fail(`prepare answered ${plan.kind}`);
  const run: ExecutionPlanRun = plan;
  assert.deepEqual([...run.types].sort(), [...types].sort());
  const startedAt = Date.now();
  return {
    carrierId,
    cardId,
    token,
    activities,
    input: (results) => ({ carrierId, cardId, token, plan: run, results, startedAt, fromPriority: false, workflowId: `card-${cardId}`, runId: 'run-1' }),
  };
}

test('finishExecution retried after its finish landed returns the first result; the streak is counted once', async () => {
  const stack = await createStack('finish-idem');
  try {
    const card = await prepared(stack, 'idem1', ['card_status']);
    const input = card.input([{ type: 'card_status', outcome: 'failure', errorClass: 'transient', message: 'carrier unavailable', gatewayMs: 12 }]);
    const first = await card.activities.finishExecution(input);
    assert.equal(first.owned, true);
    assert.equal(first.typeFinishes[0]?.failAfter, 1);
    // The local activity's retry: same input, after the first attempt's Lua finish landed.
    const second = await card.activities.finishExecution(input);
    assert.deepEqual(second, first);
    const state = await stack.deps.store.readDue(card.carrierId, card.cardId);
    assert.equal(state?.types.card_status.fail, 1, 'failure counted once');
  } finally {
    await stack.close();
  }
});

test('finishExecution retried after a recovery returns the streak it ended (the alert is recovered) and the same package evaluation', async () => {
  const stack = await createStack('finish-idem-rec');
  try {
    const card = await prepared(stack, 'idem2', ['carddata', 'package']);
    // A streak of 3 failures with its alert open.
    await stack.deps.redis.hset(stack.deps.store.keys(card.carrierId).due(card.cardId), DueField.fail('carddata'), '3');
    const alert = await recordFailure(stack.deps.pool, {
      cardId: card.cardId,
      carrierId: card.carrierId,
      type: 'carddata',
      failCount: 3,
      error: 'transient|x',
      threshold: 3,
    });
    assert.equal(alert.opened, true);
    const input = card.input([
      {
        type: 'carddata',
        outcome: 'success',
        gatewayMs: 5,
        observation: { collectionId: 'idem2-carddata-1', observedAt: new Date().toISOString(), payload: { usageKb: 10 } },
      },
    ]);
    const first = await card.activities.finishExecution(input);
    await new Promise((resolve) => setTimeout(resolve, 5)); // a retry comes later: a re-evaluation would differ
    const second = await card.activities.finishExecution(input);
    assert.deepEqual(second, first);
    assert.equal(second.typeFinishes.find((t) => t.type === 'carddata')?.failBefore, 3);
    // The durable record written from the retry's result recovers the alert.
    const ingest = createIngestActivities({ pool: stack.deps.pool, priority: stack.services.priority });
    const recorded = await ingest.recordExecution({
      ...input,
      results: second.results,
      outcome: second.outcome,
      owned: second.owned,
      typeFinishes: second.typeFinishes,
    });
    assert.equal(recorded.alertsRecovered, 1);
    const { rows } = await stack.db.pool.query<{ status: string }>('SELECT status FROM polling_failure_alert WHERE card_id = $1::bigint', [card.cardId]);
    assert.deepEqual(
      rows.map((r) => r.status),
      ['recovered'],
    );
  } finally {
    await stack.close();
  }
});

test('a run replayed after its finish landed (its worker died before the task completed) gets the record to write, not a lost claim', async () => {
  const stack = await createStack('finish-replayed');
  try {
    const card = await prepared(stack, 'idem3', ['card_status']);
    const answered: StepResult = {
      type: 'card_status',
      outcome: 'success',
      gatewayMs: 7,
      observation: { collectionId: 'idem3-status-1', observedAt: new Date().toISOString(), payload: { network: 'online' } },
    };
    const input = card.input([answered]);
    const finished = await card.activities.finishExecution(input);
    // The replay's preparation: the claim is gone (the finish released it), the finish is this run's.
    const replayed = await card.activities.prepareExecution({
      carrierId: card.carrierId,
      cardId: card.cardId,
      token: card.token,
      executorId: 'run-1',
      fromPriority: false,
    });
    if (replayed.kind !== 'finished') assert.fail(`the replay's preparation answered ${replayed.kind} (its finish's record would be lost)`);
    assert.deepEqual(replayed.results, [answered]);
    assert.deepEqual(
      { outcome: replayed.outcome, owned: replayed.owned, typeFinishes: replayed.typeFinishes, startedAt: replayed.startedAt },
      { outcome: finished.outcome, owned: finished.owned, typeFinishes: finished.typeFinishes, startedAt: input.startedAt },
    );
    assert.deepEqual(replayed.plan.types, input.plan.types);
    // A batch's card (executor `<run id>/<card id>`) is the same run; another run of the token is not.
    const asBatch = await card.activities.prepareExecution({
      carrierId: card.carrierId,
      cardId: card.cardId,
      token: card.token,
      executorId: `run-1/${card.cardId}`,
      fromPriority: false,
    });
    assert.equal(asBatch.kind, 'finished');
    const other = await card.activities.prepareExecution({
      carrierId: card.carrierId,
      cardId: card.cardId,
      token: card.token,
      executorId: 'run-2',
      fromPriority: false,
    });
    assert.equal(other.kind, 'lost');

    // The batch shape: a newer claim of the card runs and finishes before the replay (a card due
    // again within the task timeout), replacing the card's `fin`. The replay still finds its results.
    await stack.deps.store.upsert({ carrierId: card.carrierId, cardId: card.cardId, dues: { card_status: Date.now() - 1 } });
    const again = await stack.deps.store.claim({
      carrierId: card.carrierId,
      leaseMs: 60_000,
      inflightLimit: 10,
      priorityRatio: 0,
      tokenPrefix: 'idem3.2',
      typeGroups: {},
      countRealname: false,
    });
    const newer = again.claimed[0]?.token;
    assert.ok(newer !== undefined && newer !== card.token, 'a newer claim of the card');
    assert.equal(await stack.deps.store.finish({ carrierId: card.carrierId, cardId: card.cardId, token: newer, set: {}, del: [], record: 'newer' }), true);
    const late = await card.activities.prepareExecution({
      carrierId: card.carrierId,
      cardId: card.cardId,
      token: card.token,
      executorId: `run-1/${card.cardId}`,
      fromPriority: false,
    });
    if (late.kind !== 'finished') assert.fail(`the replay after a newer finish answered ${late.kind} (its record would be lost)`);
    assert.deepEqual(late.results, [answered]);
    assert.equal(late.owned, false, 'the reply is not known once a newer finish replaced it');
    assert.deepEqual(late.typeFinishes, finished.typeFinishes);
  } finally {
    await stack.close();
  }
});
