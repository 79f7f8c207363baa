/**
 * cardBatch on the time-skipping test server, its per-card activities replaced by recorders and
 * its bookkeeping flushes the production ones over them (createBookkeepingBatchActivities): each
 * card's execution decides on its own (unprepared, lost, lease lost, finished), records go out in
 * one flush per point in both ingest modes. (test/orchestration/cardBatch.test.ts covers step
 * failures, timeouts and a finish that throws on the dev server.)
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ApplicationFailure } from '@temporalio/activity';
import { createBookkeepingBatchActivities } from '../../src/activities/bookkeepingBatch.js';
import type { ExecutionPlanRun } from '../../src/workflow-safe/cardRun.js';
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
