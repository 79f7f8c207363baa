/**
 * cardBatch on the real Temporal dev server, its activities replaced by recorders (the workflow's
 * collaborators): every card goes through the same execution as cardCheck under an executor id of
 * its own, one card's failure, timeout, exception or lost lease touches that card only, the run
 * succeeds and counts them, and each card's local activities carry a summary naming the card.
 * The whole stack in both start modes: test/orchestration/batchShape.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { ApplicationFailure, sleep } from '@temporalio/activity';
import { Worker } from '@temporalio/worker';
import type { PrepareInput } from '../../src/activities/card.js';
import { createBookkeepingBatchActivities, type BookkeepingActivities } from '../../src/activities/bookkeepingBatch.js';
import type { RecordExecutionInput } from '../../src/ingest/record.js';
import type { ExecutionPlan, FinishInput, GatewayStepInput, StepResult } from '../../src/workflow-safe/cardRun.js';
import { cardBatch, type CardBatchArgs } from '../../src/workflows/cardBatch.js';
import { bundleOnce, connectTestEnv, uniqueName } from '../../testkit/temporal.js';
import { installQuietWorkerRuntime } from '../../testkit/isolatedStack.js';

/** The cards of the batch, by what happens to them. */
const CARD = { ok1: '11', ok2: '12', stepFails: '13', finishThrows: '14', leaseLost: '15', busy: '16', stepTimesOut: '17' } as const;
const STEP_TIMEOUT_MS = 500;

interface Recorded {
  readonly prepared: PrepareInput[];
  readonly steps: GatewayStepInput[];
  readonly released: string[];
  readonly finished: string[];
  readonly records: RecordExecutionInput[];
}

function recordingActivities(recorded: Recorded) {
  const plan: ExecutionPlan = {
    kind: 'run',
    iccid: '89860000000000000001',
    gatewayAccount: 'batch-gw',
    types: ['card_status'],
    typeGroups: {},
    stepTimeoutMs: STEP_TIMEOUT_MS,
    totalTimeoutMs: 10_000,
    leaseMs: 20_000,
    earliestDue: 0,
    intervalsMs: { card_status: 600_000 },
    ingestMode: 'sync',
    gatewaySteps: 'local',
  };
  return {
    async prepareExecution(input: PrepareInput): Promise<ExecutionPlan> {
      recorded.prepared.push(input);
      return input.cardId === CARD.busy ? { kind: 'busy' } : plan;
    },
    async releaseClaim(input: { cardId: string }): Promise<boolean> {
      recorded.released.push(input.cardId);
      return true;
    },
    async finishNotPolled(): Promise<void> {},
    async checkGateway(input: GatewayStepInput): Promise<StepResult | 'lease_lost'> {
      recorded.steps.push(input);
      if (input.cardId === CARD.stepFails) throw ApplicationFailure.nonRetryable('the carrier refused the ICCID', 'permanent');
      if (input.cardId === CARD.leaseLost) return 'lease_lost';
      // Past the step's start-to-close timeout (step timeout + 2 s), both attempts.
      if (input.cardId === CARD.stepTimesOut) await sleep(STEP_TIMEOUT_MS + 4000);
      return { type: input.type, outcome: 'success', gatewayMs: 5 };
    },
    async finishExecution(input: FinishInput) {
      recorded.finished.push(input.cardId);
      if (input.cardId === CARD.finishThrows) throw ApplicationFailure.nonRetryable('finish could not be written', 'broken');
      const failed = input.results.some((result) => result.outcome === 'failure');
      return { owned: true, outcome: failed ? ('failure' as const) : ('success' as const), typeFinishes: [], results: input.results };
    },
    async recordExecution(input: RecordExecutionInput) {
      recorded.records.push(input);
      return { alertsOpened: 0, alertsRecovered: 0 };
    },
    async enqueueRecord(input: RecordExecutionInput): Promise<string> {
      recorded.records.push(input);
      return '0-1';
    },
  };
}

function withBatchedBookkeeping<T extends BookkeepingActivities>(activities: T) {
  return { ...activities, ...createBookkeepingBatchActivities(activities) };
}

/** The summary a history event carries (user metadata, a JSON string payload); undefined when none. */
function summaryOf(event: { userMetadata?: { summary?: { data?: Uint8Array | null } | null } | null }): string | undefined {
  const data = event.userMetadata?.summary?.data;
  return data ? (JSON.parse(Buffer.from(data).toString('utf8')) as string) : undefined;
}

test('cardBatch: each card executed on its own, its failure its own, the run completes and counts outcomes', async () => {
  // The failures below are the point of the test: the worker's own warnings about them are noise.
  installQuietWorkerRuntime();
  const env = await connectTestEnv();
  const recorded: Recorded = { prepared: [], steps: [], released: [], finished: [], records: [] };
  try {
    const taskQueue = uniqueName('card-batch');
    const worker = await Worker.create({
      connection: env.nativeConnection,
      namespace: env.namespace ?? 'default',
      taskQueue,
      workflowBundle: await bundleOnce(fileURLToPath(new URL('../../src/workflows/index.ts', import.meta.url))),
      // The batch's bookkeeping flushes call the same (recording) per-card activities.
      activities: withBatchedBookkeeping(recordingActivities(recorded)),
    });
    const cards = Object.values(CARD).map((cardId) => ({ cardId, token: `round.1@1:${cardId}`, fromPriority: false }));
    const claimedAt = Date.now() - 5000;
    const args: CardBatchArgs = {
      carrierId: '7',
      cards,
      fromPriority: false,
      claimedAt,
      taskQueues: { control: taskQueue, card: taskQueue, gateway: taskQueue, ingest: taskQueue },
    };
    const workflowId = uniqueName('card-batch-7');
    const handle = await env.client.workflow.start(cardBatch, { taskQueue, workflowId, args: [args] });
    const result = await worker.runUntil(handle.result());
    const { runId } = await handle.describe();

    // The card whose finish threw ends as a lost lease (its claim is left to its lease), its record written all the same.
    assert.deepEqual(result.outcomes, { success: 2, failure: 2, lease_lost: 2, lost: 1 });
    assert.equal((await handle.describe()).status.name, 'COMPLETED');

    // Every card prepared once, under an executor id of its own, its start lag counted from the claim.
    assert.deepEqual(recorded.prepared.map((input) => input.cardId).sort(), Object.values(CARD).sort());
    for (const input of recorded.prepared) {
      assert.equal(input.executorId, `${runId}/${input.cardId}`);
      assert.equal(input.token, `round.1@1:${input.cardId}`);
      assert.ok((input.startLagMs ?? 0) >= 5000, `start lag ${input.startLagMs} from the claim`);
    }
    // The lease is renewed under the same executor id; no gateway step for the card whose exec right is someone else's.
    assert.ok(recorded.steps.length > 0);
    for (const step of recorded.steps) assert.equal(step.executorId, `${runId}/${step.cardId}`);
    assert.ok(!recorded.steps.some((step) => step.cardId === CARD.busy));

    // Records: the batch run's ids on each card's own record; none for the busy card. The card whose
    // finish threw still has its record, with its step's result.
    const byCard = new Map(recorded.records.map((record) => [record.cardId, record]));
    assert.deepEqual([...byCard.keys()].sort(), [CARD.ok1, CARD.ok2, CARD.stepFails, CARD.finishThrows, CARD.leaseLost, CARD.stepTimesOut].sort());
    assert.equal(byCard.get(CARD.finishThrows)?.outcome, 'lease_lost');
    assert.deepEqual(
      byCard.get(CARD.finishThrows)?.results.map((result) => result.outcome),
      ['success'],
    );
    for (const record of byCard.values()) assert.deepEqual([record.workflowId, record.runId], [workflowId, runId]);
    assert.equal(byCard.get(CARD.ok1)?.outcome, 'success');
    assert.equal(byCard.get(CARD.leaseLost)?.outcome, 'lease_lost');
    const failedStep = byCard.get(CARD.stepFails)?.results[0];
    assert.ok(failedStep?.outcome === 'failure' && failedStep.errorClass === 'permanent', JSON.stringify(failedStep));
    const timedOut = byCard.get(CARD.stepTimesOut)?.results[0];
    assert.ok(timedOut?.outcome === 'failure' && timedOut.errorClass === 'timeout', JSON.stringify(timedOut));
    // The lease-lost card completed no step: nothing to finish. A failure from finish on leaves the claim to its lease, as cardCheck does.
    assert.ok(!recorded.finished.includes(CARD.leaseLost));
    assert.deepEqual(recorded.released, []);

    // The run's timeline names each card on its local activities; no search attribute upsert.
    const events = (await handle.fetchHistory()).events ?? [];
    const summaries = events.filter((event) => event.markerRecordedEventAttributes != null).map(summaryOf);
    for (const cardId of Object.values(CARD)) {
      assert.ok(
        summaries.some((summary) => summary !== undefined && new RegExp(`\\b${cardId}\\b`).test(summary)),
        `a marker names card ${cardId}: ${summaries.join(' | ')}`,
      );
    }
    // Every card's preparation went out in one flush: one marker for the seven cards, not seven.
    const prepares = summaries.filter((summary) => summary?.startsWith('prepareExecution'));
    assert.deepEqual(prepares, [`prepareExecution: cards ${Object.values(CARD).join(', ')}`]);
    assert.ok(summaries.includes(`card ${CARD.ok1}: card_status`), 'a gateway step names its card and type');
    // (patched() records its change id in TemporalChangeVersion: the finish that threw took a patched path.)
    const upserted = events.flatMap((event) => Object.keys(event.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {}));
    assert.deepEqual(
      upserted.filter((key) => key !== 'TemporalChangeVersion'),
      [],
    );
  } finally {
    await env.teardown();
  }
});
