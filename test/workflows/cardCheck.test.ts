/**
 * cardCheck (the execution of one claimed card, `executeCard`) on the time-skipping test server,
 * its activities replaced by recorders: what the workflow decides at each step — an exec right
 * refused, a card that cannot be prepared or is no longer polled, gateway steps that fail, retry,
 * time out or find the lease gone, the total timeout, finish, and the record in both ingest modes.
 * Retry backoffs run on skipped time; only local activities' short in-worker backoffs and the step
 * timeouts take real time.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ApplicationFailure, sleep } from '@temporalio/activity';
import type { CardFinishInput, CardFinishResult, PrepareInput } from '../../src/activities/card.js';
import type { RecordExecutionInput } from '../../src/ingest/record.js';
import type { ExecutionPlan, ExecutionPlanRun, GatewayStepInput, StepResult } from '../../src/workflow-safe/cardRun.js';
import { cardCheck, type CardCheckArgs } from '../../src/workflows/cardCheck.js';
import type { GatewayCheckType } from '../../src/workflow-safe/checkTypes.js';
import { timeSkippingEnv, type TimeSkippingEnvironment } from '../../testkit/timeSkipping.js';
import { attempt, createTestWorker, testTaskQueues, type Call, type CardRunActivities } from '../../testkit/workflowTest.js';
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
  types: ['card_status', 'carddata', 'realname', 'package'],
  typeGroups: { card_status: 'status', carddata: 'data', realname: 'data' },
  stepTimeoutMs: 3000,
  totalTimeoutMs: 60_000,
  leaseMs: 20_000,
  earliestDue: 0,
  intervalsMs: { card_status: 60_000, carddata: 600_000, realname: 600_000, package: 600_000 },
  ingestMode: 'sync',
  gatewaySteps: 'local',
};

type Step = (input: GatewayStepInput) => Promise<StepResult | 'lease_lost'>;
const success: Step = async (input) => ({ type: input.type, outcome: 'success', gatewayMs: 3 });

interface Scenario {
  readonly prepare?: (input: PrepareInput) => Promise<ExecutionPlan>;
  readonly steps?: Partial<Record<GatewayCheckType, Step>>;
  readonly finish?: (input: CardFinishInput) => Promise<CardFinishResult>;
}

/** What the stubs saw, by activity. */
interface Recorded {
  readonly prepared: Call<PrepareInput>[];
  readonly released: Call<{ cardId: string; token: string }>[];
  readonly notPolled: Call<{ reason: string; fromPriority: boolean }>[];
  readonly steps: Call<GatewayStepInput>[];
  readonly finished: Call<CardFinishInput>[];
  readonly recorded: Call<RecordExecutionInput>[];
  readonly enqueued: Call<RecordExecutionInput>[];
}

/** The finish a real one would answer for these results (outcome by the worst step), owned. */
async function plainFinish(input: CardFinishInput): Promise<CardFinishResult> {
  const failed = input.results.some((result) => result.outcome === 'failure');
  return {
    owned: input.leaseLost !== true,
    outcome: failed ? 'failure' : 'success',
    typeFinishes: input.results.map((result) => ({
      type: result.type,
      outcome: result.outcome,
      failBefore: 0,
      failAfter: result.outcome === 'failure' ? 1 : 0,
      firstFailedAt: null,
      nextDue: 1,
      confirmationMissed: false,
      confirmed: false,
    })),
    results: input.results,
  };
}

function stubs(scenario: Scenario): { activities: CardRunActivities; recorded: Recorded } {
  const recorded: Recorded = { prepared: [], released: [], notPolled: [], steps: [], finished: [], recorded: [], enqueued: [] };
  const activities: CardRunActivities = {
    async prepareExecution(input) {
      recorded.prepared.push({ input, attempt: attempt() });
      return (scenario.prepare ?? (async () => PLAN))(input);
    },
    async releaseClaim(input) {
      recorded.released.push({ input, attempt: attempt() });
      return true;
    },
    async finishNotPolled(input) {
      recorded.notPolled.push({ input, attempt: attempt() });
    },
    async checkGateway(input) {
      recorded.steps.push({ input, attempt: attempt() });
      return (scenario.steps?.[input.type] ?? success)(input);
    },
    async finishExecution(input) {
      recorded.finished.push({ input, attempt: attempt() });
      return (scenario.finish ?? plainFinish)(input);
    },
    async recordExecution(input) {
      recorded.recorded.push({ input, attempt: attempt() });
      return { alertsOpened: 0, alertsRecovered: 0 };
    },
    async enqueueRecord(input) {
      recorded.enqueued.push({ input, attempt: attempt() });
      return '1-0';
    },
  };
  return { activities, recorded };
}

/** Runs one cardCheck with `scenario`'s stubs on a worker of its own; its result or failure, and what the stubs saw. */
async function runCard(scenario: Scenario, options: { fromPriority?: boolean } = {}) {
  const taskQueues = testTaskQueues('card-check');
  const { activities, recorded } = stubs(scenario);
  const worker = await createTestWorker(env, taskQueues.card, activities);
  const args: CardCheckArgs = { carrierId: '7', cardId: '42', token: 'run-a.3@1:42', fromPriority: options.fromPriority ?? false, taskQueues };
  const handle = await env.client.workflow.start(cardCheck, { taskQueue: taskQueues.card, workflowId: uniqueName('card-42'), args: [args] });
  const result = await worker.runUntil(
    handle.result().then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    ),
  );
  return { result, recorded, runId: (await handle.describe()).runId, workflowId: handle.workflowId };
}

function outcomeOf(result: Awaited<ReturnType<typeof runCard>>['result']): string {
  if (!result.ok) throw result.error instanceof Error ? result.error : new Error(String(result.error));
  return result.value.outcome;
}

test('exec right refused (lost, busy): ends at once, nothing called but the preparation', async () => {
  for (const kind of ['lost', 'busy'] as const) {
    const { result, recorded, runId } = await runCard({ prepare: async () => ({ kind }) });
    assert.equal(outcomeOf(result), 'lost', kind);
    assert.equal(recorded.prepared.length, 1);
    const prepared = recorded.prepared[0]?.input;
    assert.equal(prepared?.executorId, runId, 'the run id is the executor');
    assert.equal(prepared?.token, 'run-a.3@1:42');
    assert.deepEqual([recorded.steps.length, recorded.finished.length, recorded.released.length, recorded.recorded.length], [0, 0, 0, 0], kind);
  }
});

test('preparation failing past its bounded retries: the claim is given back at once, the run ends unprepared', async () => {
  const { result, recorded } = await runCard({
    prepare: async () => {
      throw ApplicationFailure.retryable('PostgreSQL away', 'unavailable');
    },
  });
  assert.equal(outcomeOf(result), 'unprepared');
  // The bookkeeping's retry policy (20 attempts), its longer backoffs on skipped time.
  assert.deepEqual(
    recorded.prepared.map((call) => call.attempt),
    Array.from({ length: 20 }, (_, i) => i + 1),
  );
  assert.deepEqual(
    recorded.released.map((call) => [call.input.cardId, call.input.token]),
    [['42', 'run-a.3@1:42']],
  );
  assert.deepEqual([recorded.steps.length, recorded.finished.length, recorded.recorded.length], [0, 0, 0]);
});

test('preparation refused for good (database unreachable, claim already released by it): one attempt, released, unprepared', async () => {
  const { result, recorded } = await runCard({
    prepare: async () => {
      throw ApplicationFailure.create({ type: 'database_unreachable', message: 'not prepared', nonRetryable: true });
    },
  });
  assert.equal(outcomeOf(result), 'unprepared');
  assert.equal(recorded.prepared.length, 1);
  assert.equal(recorded.released.length, 1);
});

test('card no longer polled: finishNotPolled with the reason and lane, no gateway call, no record', async () => {
  const { result, recorded } = await runCard({ prepare: async () => ({ kind: 'not_polled', reason: 'card moved to carrier 9' }) }, { fromPriority: true });
  assert.equal(outcomeOf(result), 'not_polled');
  assert.deepEqual(
    recorded.notPolled.map((call) => [call.input.reason, call.input.fromPriority]),
    [['card moved to carrier 9', true]],
  );
  assert.deepEqual([recorded.steps.length, recorded.finished.length, recorded.recorded.length, recorded.released.length], [0, 0, 0, 0]);
});

test('gateway steps: run in order, a transient failure retried once, a permanent one not; package is local; finish and the sync record get them', async () => {
  const { result, recorded, runId, workflowId } = await runCard({
    steps: {
      carddata: async () => {
        throw ApplicationFailure.retryable('gateway 503', 'transient');
      },
      realname: async () => {
        throw ApplicationFailure.nonRetryable('ICCID refused', 'permanent');
      },
    },
  });
  assert.equal(outcomeOf(result), 'failure');
  assert.deepEqual(
    recorded.steps.map((call) => [call.input.type, call.attempt]),
    [
      ['card_status', 1],
      ['carddata', 1],
      ['carddata', 2],
      ['realname', 1],
    ],
  );
  for (const { input } of recorded.steps) {
    assert.deepEqual([input.executorId, input.leaseMs, input.iccid], [runId, PLAN.leaseMs, PLAN.iccid]);
    assert.equal(input.group, PLAN.typeGroups[input.type]);
    assert.ok(input.deadlineMs > 0);
  }
  const finished = recorded.finished[0]?.input;
  assert.equal(recorded.finished.length, 1);
  assert.equal(finished?.leaseLost, undefined);
  assert.deepEqual(
    finished?.results.map((r) => [r.type, r.outcome, r.outcome === 'failure' ? r.errorClass : '']),
    [
      ['card_status', 'success', ''],
      ['carddata', 'failure', 'transient'],
      ['realname', 'failure', 'permanent'],
    ],
  );
  // Sync ingest: the worker writes the record itself, with what finish returned.
  assert.equal(recorded.enqueued.length, 0);
  const record = recorded.recorded[0]?.input;
  assert.equal(recorded.recorded.length, 1);
  assert.deepEqual([record?.outcome, record?.owned, record?.workflowId, record?.runId], ['failure', true, workflowId, runId]);
  assert.deepEqual(
    record?.typeFinishes.map((f) => [f.type, f.failAfter]),
    [
      ['card_status', 0],
      ['carddata', 1],
      ['realname', 1],
    ],
  );
});

test('async ingest: the record goes to the ingest stream (enqueueRecord), not to PostgreSQL', async () => {
  const { result, recorded } = await runCard({ prepare: async () => ({ ...PLAN, types: ['card_status'], ingestMode: 'async' }) });
  assert.equal(outcomeOf(result), 'success');
  assert.deepEqual([recorded.enqueued.length, recorded.recorded.length], [1, 0]);
  assert.equal(recorded.enqueued[0]?.input.outcome, 'success');
});

test('a step past its timeout (both attempts) is that step failing with class timeout; the next step still runs', async () => {
  const stepTimeoutMs = 200;
  const { result, recorded } = await runCard({
    prepare: async () => ({ ...PLAN, types: ['carddata', 'card_status'], stepTimeoutMs }),
    steps: {
      // Past the step's start-to-close timeout (step timeout + 2 s).
      carddata: async () => {
        await sleep(stepTimeoutMs + 5000);
        return { type: 'carddata', outcome: 'success', gatewayMs: 1 };
      },
    },
  });
  assert.equal(outcomeOf(result), 'failure');
  assert.deepEqual(
    recorded.steps.map((call) => [call.input.type, call.attempt]),
    [
      ['carddata', 1],
      ['carddata', 2],
      ['card_status', 1],
    ],
  );
  const results = recorded.finished[0]?.input.results ?? [];
  assert.ok(results[0]?.outcome === 'failure' && results[0].errorClass === 'timeout', JSON.stringify(results[0]));
  assert.equal(results[1]?.outcome, 'success');
});

test('total timeout spent: the remaining gateway steps are skipped without a call', async () => {
  const { result, recorded } = await runCard({ prepare: async () => ({ ...PLAN, totalTimeoutMs: 0 }) });
  assert.equal(outcomeOf(result), 'success');
  assert.equal(recorded.steps.length, 0);
  assert.deepEqual(
    recorded.finished[0]?.input.results.map((r) => [r.type, r.outcome, r.outcome === 'skipped' ? r.reason : '']),
    [
      ['card_status', 'skipped', 'total_timeout'],
      ['carddata', 'skipped', 'total_timeout'],
      ['realname', 'skipped', 'total_timeout'],
    ],
  );
});

test('lease lost after a step: no further step, the completed one finished as stale, the record says lease_lost and not owned', async () => {
  const { result, recorded } = await runCard({ steps: { carddata: async () => 'lease_lost' } });
  assert.equal(outcomeOf(result), 'lease_lost');
  assert.deepEqual(
    recorded.steps.map((call) => call.input.type),
    ['card_status', 'carddata'],
  );
  const finished = recorded.finished[0]?.input;
  assert.equal(finished?.leaseLost, true);
  assert.deepEqual(
    finished?.results.map((r) => r.type),
    ['card_status'],
  );
  const record = recorded.recorded[0]?.input;
  assert.deepEqual([record?.outcome, record?.owned], ['lease_lost', false]);
  assert.deepEqual(
    record?.results.map((r) => r.type),
    ['card_status'],
  );
  assert.equal(recorded.released.length, 0, 'a lost claim is not released by its former executor');
});

test('lease lost before any step: nothing to finish, the record has no results', async () => {
  const { result, recorded } = await runCard({ steps: { card_status: async () => 'lease_lost' } });
  assert.equal(outcomeOf(result), 'lease_lost');
  assert.equal(recorded.finished.length, 0);
  const record = recorded.recorded[0]?.input;
  assert.deepEqual([record?.outcome, record?.owned, record?.results.length, record?.typeFinishes.length], ['lease_lost', false, 0, 0]);
});

test('finish refused for good: not retried, the claim left to its lease (no release), the gateway results recorded as lease_lost', async () => {
  const { result, recorded } = await runCard({
    prepare: async () => ({ ...PLAN, types: ['card_status'] }),
    finish: async () => {
      throw ApplicationFailure.nonRetryable('finish script refused', 'broken');
    },
  });
  // The run's gateway results are not lost to a finish that cannot succeed: they land with the
  // outcome of a run whose lease is gone (src/workflows/finishRetry.ts).
  assert.equal(outcomeOf(result), 'lease_lost');
  assert.deepEqual([recorded.finished.length, recorded.released.length, recorded.recorded.length], [1, 0, 1]);
  const [record] = recorded.recorded;
  assert.deepEqual([record?.input.outcome, record?.input.results.map((r) => r.type)], ['lease_lost', ['card_status']]);
});

test('gateway steps on the gateway queue: a transient failure retried by the server after its backoff, then the step succeeds', async () => {
  const { result, recorded } = await runCard({
    prepare: async () => ({ ...PLAN, types: ['card_status'], gatewaySteps: 'queue' }),
    steps: {
      card_status: async (input) => {
        if (attempt() === 1) throw ApplicationFailure.retryable('gateway 503', 'transient');
        return { type: input.type, outcome: 'success', gatewayMs: 2 };
      },
    },
  });
  assert.equal(outcomeOf(result), 'success');
  assert.deepEqual(
    recorded.steps.map((call) => call.attempt),
    [1, 2],
  );
});
