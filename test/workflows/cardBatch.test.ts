/**
 * cardBatch on the time-skipping test server, its per-card activities replaced by recorders and
 * its bookkeeping flushes the production ones over them (createBookkeepingBatchActivities): each
 * card's execution decides on its own (unprepared, lost, busy, lease lost, a step that fails, times
 * out, a finish that throws, finished) under an executor id of its own, the run completes and
 * counts them, records go out in one flush per point in both ingest modes, and each card's local
 * activities carry a summary naming the card. The whole stack in both start modes:
 * test/orchestration/batchShape.test.ts.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ApplicationFailure, sleep } from '@temporalio/activity';
import { createBookkeepingBatchActivities } from '../../src/activities/bookkeepingBatch.js';
import type { PrepareInput } from '../../src/activities/card.js';
import type { ExecutionPlanRun, GatewayStepInput } from '../../src/workflow-safe/cardRun.js';
import type { RecordExecutionInput } from '../../src/ingest/record.js';
import { cardBatch, type CardBatchArgs } from '../../src/workflows/cardBatch.js';
import { timeSkippingEnv, type TimeSkippingEnvironment } from '../../testkit/timeSkipping.js';
import { createTestWorker, testTaskQueues, type CardRunActivities } from '../../testkit/workflowTest.js';
import { uniqueName } from '../../testkit/temporal.js';

let env: TimeSkippingEnvironment;
before(async () => {
  env = await timeSkippingEnv();
});
after(async () => {
  await env?.teardown();
});

const PLAN: ExecutionPlanRun = {
  kind: 'run',
  iccid: '89860000000000000042',
  gatewayAccount: 'unit-gw',
  types: ['card_status', 'carddata'],
  typeGroups: {},
  stepTimeoutMs: 3000,
  totalTimeoutMs: 60_000,
  leaseMs: 20_000,
  earliestDue: 0,
  intervalsMs: { card_status: 60_000, carddata: 600_000 },
  ingestMode: 'sync',
  gatewaySteps: 'local',
};

/** The cards of the mixed batch, by what happens to them. */
const CARD = { unprepared: '21', lost: '22', leaseLost: '23', ok: '24' } as const;

interface Recorded {
  readonly released: string[];
  readonly finished: string[];
  readonly records: { via: 'sync' | 'async'; input: RecordExecutionInput }[];
}

function stubs(ingestMode: 'sync' | 'async', recorded: Recorded): CardRunActivities {
  return {
    async prepareExecution(input) {
      if (input.cardId === CARD.unprepared) throw ApplicationFailure.retryable('PostgreSQL away', 'unavailable');
      if (input.cardId === CARD.lost) return { kind: 'lost' };
      return { ...PLAN, ingestMode };
    },
    async releaseClaim(input) {
      recorded.released.push(input.cardId);
      return true;
    },
    async finishNotPolled() {},
    async checkGateway(input) {
      if (input.cardId === CARD.leaseLost && input.type === 'carddata') return 'lease_lost';
      return { type: input.type, outcome: 'success', gatewayMs: 2 };
    },
    async finishExecution(input) {
      recorded.finished.push(input.cardId);
      return { owned: input.leaseLost !== true, outcome: 'success', typeFinishes: [], results: input.results };
    },
    async recordExecution(input) {
      recorded.records.push({ via: 'sync', input });
      return { alertsOpened: 0, alertsRecovered: 0 };
    },
    async enqueueRecord(input) {
      recorded.records.push({ via: 'async', input });
      return '1-0';
    },
  };
}

/** The summaries of the run's markers (local activities): one per flush or gateway step. */
function markerSummaries(
  events: { markerRecordedEventAttributes?: unknown; userMetadata?: { summary?: { data?: Uint8Array | null } | null } | null }[],
): string[] {
  return events
    .filter((event) => event.markerRecordedEventAttributes != null)
    .map((event) => {
      const data = event.userMetadata?.summary?.data;
      return data ? (JSON.parse(Buffer.from(data).toString('utf8')) as string) : '';
    });
}

for (const ingestMode of ['sync', 'async'] as const) {
  test(`cardBatch (${ingestMode} ingest): each card decides on its own; the records of the finished cards go out in one flush`, async () => {
    const taskQueues = testTaskQueues(`card-batch-${ingestMode}`);
    const recorded: Recorded = { released: [], finished: [], records: [] };
    const activities = stubs(ingestMode, recorded);
    const worker = await createTestWorker(env, taskQueues.card, { ...activities, ...createBookkeepingBatchActivities(activities) });
    const args: CardBatchArgs = {
      carrierId: '7',
      cards: Object.values(CARD).map((cardId) => ({ cardId, token: `r.1@1:${cardId}`, fromPriority: false })),
      fromPriority: false,
      taskQueues,
    };
    const handle = await env.client.workflow.start(cardBatch, { taskQueue: taskQueues.card, workflowId: uniqueName('card-batch'), args: [args] });
    const result = await worker.runUntil(handle.result());

    assert.deepEqual(result.outcomes, { unprepared: 1, lost: 1, lease_lost: 1, success: 1 });
    // The card that could not be prepared gave its claim back at once; nobody else did.
    assert.deepEqual(recorded.released, [CARD.unprepared]);
    // The lease-lost card's completed step is finished as stale, with the card that ran through.
    assert.deepEqual(recorded.finished.sort(), [CARD.leaseLost, CARD.ok].sort());
    // Records: both run cards', by the ingest mode's path only.
    assert.deepEqual(recorded.records.map((r) => [r.input.cardId, r.via, r.input.outcome]).sort(), [
      [CARD.leaseLost, ingestMode, 'lease_lost'],
      [CARD.ok, ingestMode, 'success'],
    ]);
    const kind = ingestMode === 'sync' ? 'recordExecution' : 'enqueueRecord';
    const flushes = markerSummaries((await handle.fetchHistory()).events ?? []).filter((summary) => summary.startsWith(kind));
    assert.equal(flushes.length, 1, `one ${kind} flush: ${flushes.join(' | ')}`);
    for (const cardId of [CARD.leaseLost, CARD.ok]) assert.match(flushes[0] ?? '', new RegExp(`\\b${cardId}\\b`));
  });
}

/** The cards of the second batch, by what happens to them. */
const CARD2 = { ok1: '11', ok2: '12', stepFails: '13', finishThrows: '14', leaseLost: '15', busy: '16', stepTimesOut: '17' } as const;
/** Local activities time out on the worker's clock (real time): short, so the test pays little for it. */
const STEP_TIMEOUT_MS = 500;

interface Recorded2 {
  readonly prepared: PrepareInput[];
  readonly steps: GatewayStepInput[];
  readonly released: string[];
  readonly finished: string[];
  readonly records: RecordExecutionInput[];
}

function failingStubs(recorded: Recorded2): CardRunActivities {
  const plan: ExecutionPlanRun = {
    ...PLAN,
    types: ['card_status'],
    stepTimeoutMs: STEP_TIMEOUT_MS,
    totalTimeoutMs: 10_000,
    intervalsMs: { card_status: 600_000 },
  };
  return {
    async prepareExecution(input) {
      recorded.prepared.push(input);
      return input.cardId === CARD2.busy ? { kind: 'busy' } : plan;
    },
    async releaseClaim(input) {
      recorded.released.push(input.cardId);
      return true;
    },
    async finishNotPolled() {},
    async checkGateway(input) {
      recorded.steps.push(input);
      if (input.cardId === CARD2.stepFails) throw ApplicationFailure.nonRetryable('the carrier refused the ICCID', 'permanent');
      if (input.cardId === CARD2.leaseLost) return 'lease_lost';
      // Past the step's start-to-close timeout (step timeout + 2 s), both attempts.
      if (input.cardId === CARD2.stepTimesOut) await sleep(STEP_TIMEOUT_MS + 4000);
      return { type: input.type, outcome: 'success', gatewayMs: 5 };
    },
    async finishExecution(input) {
      recorded.finished.push(input.cardId);
      if (input.cardId === CARD2.finishThrows) throw ApplicationFailure.nonRetryable('finish could not be written', 'broken');
      const failed = input.results.some((result) => result.outcome === 'failure');
      return { owned: true, outcome: failed ? 'failure' : 'success', typeFinishes: [], results: input.results };
    },
    async recordExecution(input) {
      recorded.records.push(input);
      return { alertsOpened: 0, alertsRecovered: 0 };
    },
    async enqueueRecord(input) {
      recorded.records.push(input);
      return '0-1';
    },
  };
}

test('cardBatch: a failing step, a step past its timeout, a finish that throws, a lost lease, a busy card: each its own, the run completes and counts them', async () => {
  const taskQueues = testTaskQueues('card-batch-failures');
  const recorded: Recorded2 = { prepared: [], steps: [], released: [], finished: [], records: [] };
  const activities = failingStubs(recorded);
  // The batch's bookkeeping flushes call the same (recording) per-card activities.
  const worker = await createTestWorker(env, taskQueues.card, { ...activities, ...createBookkeepingBatchActivities(activities) });
  const cards = Object.values(CARD2).map((cardId) => ({ cardId, token: `round.1@1:${cardId}`, fromPriority: false }));
  // Five seconds before the run starts, on the server's clock (the workflow's time).
  const claimedAt = (await env.currentTimeMs()) - 5000;
  const args: CardBatchArgs = { carrierId: '7', cards, fromPriority: false, claimedAt, taskQueues };
  const workflowId = uniqueName('card-batch-7');
  const handle = await env.client.workflow.start(cardBatch, { taskQueue: taskQueues.card, workflowId, args: [args] });
  const result = await worker.runUntil(handle.result());
  const { runId } = await handle.describe();

  // The card whose finish threw ends as a lost lease (its claim is left to its lease), its record written all the same.
  assert.deepEqual(result.outcomes, { success: 2, failure: 2, lease_lost: 2, lost: 1 });
  assert.equal((await handle.describe()).status.name, 'COMPLETED');

  // Every card prepared once, under an executor id of its own, its start lag counted from the claim.
  assert.deepEqual(recorded.prepared.map((input) => input.cardId).sort(), Object.values(CARD2).sort());
  for (const input of recorded.prepared) {
    assert.equal(input.executorId, `${runId}/${input.cardId}`);
    assert.equal(input.token, `round.1@1:${input.cardId}`);
    assert.ok((input.startLagMs ?? 0) >= 5000, `start lag ${input.startLagMs} from the claim`);
  }
  // The lease is renewed under the same executor id; no gateway step for the card whose exec right is someone else's.
  assert.ok(recorded.steps.length > 0);
  for (const step of recorded.steps) assert.equal(step.executorId, `${runId}/${step.cardId}`);
  assert.ok(!recorded.steps.some((step) => step.cardId === CARD2.busy));

  // Records: the batch run's ids on each card's own record; none for the busy card. The card whose
  // finish threw still has its record, with its step's result.
  const byCard = new Map(recorded.records.map((record) => [record.cardId, record]));
  assert.deepEqual([...byCard.keys()].sort(), [CARD2.ok1, CARD2.ok2, CARD2.stepFails, CARD2.finishThrows, CARD2.leaseLost, CARD2.stepTimesOut].sort());
  assert.equal(byCard.get(CARD2.finishThrows)?.outcome, 'lease_lost');
  assert.deepEqual(
    byCard.get(CARD2.finishThrows)?.results.map((r) => r.outcome),
    ['success'],
  );
  for (const record of byCard.values()) assert.deepEqual([record.workflowId, record.runId], [workflowId, runId]);
  assert.equal(byCard.get(CARD2.ok1)?.outcome, 'success');
  assert.equal(byCard.get(CARD2.leaseLost)?.outcome, 'lease_lost');
  const failedStep = byCard.get(CARD2.stepFails)?.results[0];
  assert.ok(failedStep?.outcome === 'failure' && failedStep.errorClass === 'permanent', JSON.stringify(failedStep));
  const timedOut = byCard.get(CARD2.stepTimesOut)?.results[0];
  assert.ok(timedOut?.outcome === 'failure' && timedOut.errorClass === 'timeout', JSON.stringify(timedOut));
  // The lease-lost card completed no step: nothing to finish. A failure from finish on leaves the claim to its lease, as cardCheck does.
  assert.ok(!recorded.finished.includes(CARD2.leaseLost));
  assert.deepEqual(recorded.released, []);

  // The run's timeline names each card on its local activities; no search attribute upsert.
  const events = (await handle.fetchHistory()).events ?? [];
  const summaries = markerSummaries(events);
  for (const cardId of Object.values(CARD2)) {
    assert.ok(
      summaries.some((summary) => new RegExp(`\\b${cardId}\\b`).test(summary)),
      `a marker names card ${cardId}: ${summaries.join(' | ')}`,
    );
  }
  // Every card's preparation went out in one flush: one marker for the seven cards, not seven.
  assert.deepEqual(
    summaries.filter((summary) => summary.startsWith('prepareExecution')),
    [`prepareExecution: cards ${Object.values(CARD2).join(', ')}`],
  );
  assert.ok(summaries.includes(`card ${CARD2.ok1}: card_status`), 'a gateway step names its card and type');
  // (patched() records its change id in TemporalChangeVersion: the finish that threw took a patched path.)
  const upserted = events.flatMap((event) => Object.keys(event.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {}));
  assert.deepEqual(
    upserted.filter((key) => key !== 'TemporalChangeVersion'),
    [],
  );
});
