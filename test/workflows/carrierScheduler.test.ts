/**
 * carrierScheduler on the time-skipping test server, its control activities replaced by scripted
 * stubs (typed from the factory) and its children run by a card worker whose stubs end them at
 * once: the loop's decisions that otherwise take real minutes to observe — the failure backoff
 * (2, 4, 8, 16, 30 s), a child start refused because an earlier run of the card still runs, and
 * continue-as-new at the production history threshold with children in flight.
 *
 * What Redis does with a released claim (the retry delay in its lane) is the claim scripts' and
 * the control activities' part, tested with them; here, what the scheduler asks of them.
 */
import { claimedRound } from '../../testkit/claimRounds.js';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { ClaimRelease, ClaimRoundInput, ClaimRoundResult, ClaimedCard } from '../../src/workflow-safe/claimRound.js';
import { SCHEDULER_CONTINUING_AS_NEW, type RequestCheckInput } from '../../src/workflow-safe/requestCheck.js';
import { cardWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { carrierScheduler, DEFAULT_MAX_HISTORY_EVENTS, type CarrierSchedulerArgs } from '../../src/workflows/carrierScheduler.js';
import { requestCheckSignal, requestCheckUpdate, schedulerStatusQuery } from '../../src/workflows/messages.js';
import { timeSkippingEnv, type TimeSkippingEnvironment } from '../../testkit/timeSkipping.js';
import { createTestWorker, preparingOnly, stopwatch, testTaskQueues, type CardRunActivities, type ControlActivities } from '../../testkit/workflowTest.js';
import { uniqueName } from '../../testkit/temporal.js';

const { temporal } = proto;
const EventType = temporal.api.enums.v1.EventType;
type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;

let env: TimeSkippingEnvironment;
before(async () => {
  env = await timeSkippingEnv();
});
after(async () => {
  await env?.teardown();
});

/** The activities the scheduler calls, by name. */
type SchedulerActivities = Pick<ControlActivities, 'claimRound' | 'releaseClaims' | 'requestCheck' | 'requeueDuePriorityItems'>;

const STOP: ClaimRoundResult = { kind: 'stop', reason: 'carrier_disabled' };

/** Card runs that end at once (their exec right already gone): the scheduler only sees them start and complete. */
function endingCardRuns(prepared: string[]): CardRunActivities {
  return preparingOnly(async (input) => {
    prepared.push(input.cardId);
    return { kind: 'lost' };
  });
}

function schedulerArgs(taskQueues: CarrierSchedulerArgs['taskQueues'], prefix: string): CarrierSchedulerArgs {
  return { carrierId: '7', taskQueues, workflowIdPrefix: prefix };
}

const eventsOf = (events: readonly HistoryEvent[], type: proto.temporal.api.enums.v1.EventType): HistoryEvent[] =>
  events.filter((event) => event.eventType === type);
const durationMs = (duration: proto.google.protobuf.IDuration | null | undefined): number =>
  Number(duration?.seconds ?? 0) * 1000 + Math.round((duration?.nanos ?? 0) / 1e6);

test('claim failing: the loop backs off 2, 4, 8, 16 s then every 30 s, reports degraded, keeps a signalled request-check, and resumes its 1 s tick', async () => {
  const taskQueues = testTaskQueues('sched-backoff');
  let failing = true;
  let stop = false;
  const claims: ClaimRoundInput[] = [];
  const requests: { input: RequestCheckInput; ok: boolean }[] = [];
  const activities: SchedulerActivities = {
    async claimRound(input) {
      claims.push(input);
      if (stop) return STOP;
      // Failed for good at once: the loop's own decision is under test, not the local activity's retries.
      if (failing) throw ApplicationFailure.nonRetryable('WRONGTYPE running set', 'redis');
      return claimedRound([]);
    },
    async releaseClaims() {
      return 0;
    },
    async requestCheck(input) {
      requests.push({ input: input.request, ok: !failing });
      if (failing) throw ApplicationFailure.retryable('relation "polling_priority_item" does not exist', 'postgres');
      return { status: 'requested', requested: 1 };
    },
    async requeueDuePriorityItems() {
      return 0;
    },
  };
  const worker = await createTestWorker(env, taskQueues.control, activities);
  const handle = await env.client.workflow.start(carrierScheduler, {
    taskQueue: taskQueues.control,
    workflowId: uniqueName('sched-backoff'),
    args: [schedulerArgs(taskQueues, uniqueName('p'))],
  });
  const result = await worker.runUntil(async () => {
    // Rounds at 0, 2, 6, 14 and 30 s of workflow time; a request-check signalled during the fault.
    await env.sleep('31 s');
    await handle.signal(requestCheckSignal, { cardId: '42', types: ['card_status'], lane: 'priority', actor: 'test' });
    await env.sleep('60 s');
    const during = await handle.query(schedulerStatusQuery);
    assert.equal(during.mode, 'degraded');
    assert.ok((during.lastFailure?.consecutive ?? 0) >= 6, JSON.stringify(during.lastFailure));
    failing = false;
    await env.sleep('35 s');
    const afterRepair = await handle.query(schedulerStatusQuery);
    assert.equal(afterRepair.mode, 'claiming');
    assert.equal(afterRepair.lastFailure?.consecutive, 0);
    stop = true;
    return handle.result();
  });
  assert.deepEqual(result, { stopped: 'carrier_disabled' });

  // The waits the loop decided, from its history: the backoff doubling from 2 s to its 30 s cap while
  // failing, then the one-second tick once the claim succeeds again.
  const events = (await handle.fetchHistory()).events ?? [];
  const waits = eventsOf(events, EventType.EVENT_TYPE_TIMER_STARTED).map((event) => durationMs(event.timerStartedEventAttributes?.startToFireTimeout));
  const firstTick = waits.findIndex((wait) => wait <= 1000);
  assert.ok(firstTick > 4, `waits ${waits.join(', ')}`);
  assert.deepEqual(waits.slice(0, 4), [2000, 4000, 8000, 16000]);
  for (const wait of waits.slice(4, firstTick)) assert.equal(wait, 30_000, `waits ${waits.join(', ')}`);
  assert.ok(
    waits.slice(firstTick).every((wait) => wait <= 1000),
    `waits after the repair ${waits.slice(firstTick).join(', ')}`,
  );
  // The scheduler never failed (no failed workflow task either); the signal taken during the fault
  // was kept and served once the activity answered.
  assert.equal(eventsOf(events, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED).length, 0);
  assert.ok(
    requests.some((r) => !r.ok),
    'the request-check failed during the fault',
  );
  assert.equal(requests.filter((r) => r.ok && r.input.cardId === '42').length, 1, 'served once after the repair');
  // Workflow time passed is the backoffs' sum; the test took a fraction of it.
  const claimTimes = claims.map((claim) => claim.roundAt ?? 0);
  const spanSec = ((claimTimes[claimTimes.length - 1] ?? 0) - (claimTimes[0] ?? 0)) / 1000;
  assert.ok(spanSec >= 120, `${spanSec} s of workflow time`);
});

for (const mode of ['child', 'client'] as const) {
  const title =
    mode === 'child'
      ? 'start refused (CARD_START_MODE=child): an earlier run of the card still runs; its claim is released for a retry of 0.5 s, doubled at each refusal in a row, counted; the other card runs'
      : 'start refused (CARD_START_MODE=client): an earlier run of the card still runs; the claim round released it and counted it, the scheduler starts nothing';
  test(title, async (t) => {
    const phase = stopwatch(t);
    const taskQueues = testTaskQueues(`sched-conflict-${mode}`);
    const prefix = `${uniqueName('p')}-`;
    const blocked: ClaimedCard = { cardId: '51', token: 'r.1@1:51', fromPriority: false };
    const free: ClaimedCard = { cardId: '52', token: 'r.1@1:52', fromPriority: false };
    let round = 0;
    let stop = false;
    const released: ClaimRelease[][] = [];
    const calls: string[] = [];
    const prepared: string[] = [];
    const activities: SchedulerActivities & CardRunActivities = {
      ...endingCardRuns(prepared),
      async claimRound() {
        round += 1;
        calls.push(`claim ${round}`);
        if (stop) return STOP;
        // Child mode: the refused card is claimed again in the next two rounds (its retry is short).
        if (mode === 'child' && (round === 2 || round === 3)) return claimedRound([blocked]);
        if (round !== 1) return claimedRound([]);
        // Client start mode: the claim started the runs itself and released the one refused.
        return mode === 'child' ? claimedRound([blocked, free]) : claimedRound([blocked, free], { startedByClaim: true, startFailures: 1 });
      },
      async releaseClaims(input) {
        released.push([...input.cards]);
        calls.push('release');
        return input.cards.length;
      },
      async requestCheck() {
        return { status: 'requested', requested: 1 };
      },
      async requeueDuePriorityItems() {
        return 0;
      },
    };
    // A server of its own: the run refused and terminated below held the shared server's clock
    // (no time skipped) in the test after it.
    const env = await timeSkippingEnv();
    // The earlier run: under the card's workflow id, its first task a day away, so it stays running
    // (a task waiting on a queue would hold the test server's clock: no time skipped meanwhile).
    const earlier = await env.client.workflow.start('cardCheck', {
      taskQueue: `${taskQueues.card}-nobody`,
      workflowId: cardWorkflowId(blocked.cardId, prefix),
      args: [],
      startDelay: '1 day',
    });
    try {
      const worker = await createTestWorker(env, taskQueues.control, activities);
      phase('worker created');
      const handle = await env.client.workflow.start(carrierScheduler, {
        taskQueue: taskQueues.control,
        workflowId: uniqueName('sched-conflict'),
        args: [schedulerArgs(taskQueues, prefix)],
      });
      await worker.runUntil(async () => {
        await env.sleep('5 s');
        phase('5 s of workflow time');
        const status = await handle.query(schedulerStatusQuery);
        assert.equal(status.startFailures, mode === 'child' ? 3 : 1);
        stop = true;
        return handle.result();
      });
      phase('stopped, worker shut down');
      const events = (await handle.fetchHistory()).events ?? [];
      const childStarts = eventsOf(events, EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED);
      if (mode === 'child') {
        // Every start tried; the refused card's claim handed back each time, due again 0.5, 1, 2 s
        // later (not 15 s: its previous run is usually only writing its record); the other card ran.
        assert.equal(childStarts.length, 4);
        assert.equal(eventsOf(events, EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED).length, 3);
        assert.deepEqual(released, [[{ ...blocked, retryAfterMs: 500 }], [{ ...blocked, retryAfterMs: 1000 }], [{ ...blocked, retryAfterMs: 2000 }]]);
        // Each refused claim given back before the next round, not held until after it: a claim
        // held when the control worker dies expires instead.
        assert.deepEqual(calls.slice(0, 7), ['claim 1', 'release', 'claim 2', 'release', 'claim 3', 'release', 'claim 4']);
        assert.deepEqual(prepared, [free.cardId]);
      } else {
        // The claim started (and released) them: the scheduler starts no child and releases nothing.
        assert.equal(childStarts.length, 0);
        assert.deepEqual(released, []);
      }
    } finally {
      await earlier.terminate('test over').catch(() => undefined);
      await env.teardown();
    }
  });
}

/**
 * History events that make the scheduler continue as new in the test below. The production
 * threshold (DEFAULT_MAX_HISTORY_EVENTS, 2000) takes ~100 rounds and ~200 children, about 100 s on
 * two loaded cores; the rollover's rules do not depend on the number, so the suite uses fewer
 * (SCHEDULER_CAN_EVENTS=2000 runs it at the production threshold).
 */
const CAN_EVENTS = Number(process.env.SCHEDULER_CAN_EVENTS ?? 600);

test(`continue-as-new once the history has ${CAN_EVENTS} events, children in flight: drained first, rounds go on, state carried`, async (t) => {
  const phase = stopwatch(t);
  const taskQueues = testTaskQueues('sched-can');
  const prefix = `${uniqueName('p')}-`;
  const claims: ClaimRoundInput[] = [];
  let firstRunId: string | undefined;
  let nextRunRounds = 0;
  const prepared: string[] = [];
  const activities: SchedulerActivities & CardRunActivities = {
    ...endingCardRuns(prepared),
    async claimRound(input) {
      claims.push(input);
      const runId = input.tokenPrefix.split('.')[0];
      firstRunId ??= runId;
      if (runId !== firstRunId && ++nextRunRounds > 3) return STOP;
      // Safety stop: the run should have continued as new long before.
      if (claims.length > 1000) return STOP;
      const round = Number(input.tokenPrefix.split('.')[1]);
      const cards = [1, 2].map((i) => ({ cardId: String(((round * 2 + i) % 40) + 100), token: `${input.tokenPrefix}@1:${i}`, fromPriority: false }));
      // While draining, the claim starts the runs itself (no new children for the closing run).
      return input.startRuns === true ? claimedRound(cards, { startedByClaim: true }) : claimedRound(cards);
    },
    async releaseClaims(input) {
      return input.cards.length;
    },
    async requestCheck() {
      return { status: 'requested', requested: 1 };
    },
    async requeueDuePriorityItems() {
      return 0;
    },
  };
  const worker = await createTestWorker(env, taskQueues.control, activities);
  const workflowId = uniqueName('sched-can');
  const args: CarrierSchedulerArgs = {
    ...schedulerArgs(taskQueues, prefix),
    ...(CAN_EVENTS === DEFAULT_MAX_HISTORY_EVENTS ? {} : { maxHistoryEvents: CAN_EVENTS }),
  };
  const handle = await env.client.workflow.start(carrierScheduler, { taskQueue: taskQueues.control, workflowId, args: [args] });
  // result() follows the run through its continue-as-new to the stop.
  const result = await worker.runUntil(handle.result());
  phase(`${claims.length} claim rounds, ${prepared.length} card runs`);
  assert.deepEqual(result, { stopped: 'carrier_disabled' });
  assert.ok(firstRunId !== undefined);

  const first = (await env.client.workflow.getHandle(workflowId, firstRunId).fetchHistory()).events ?? [];
  const count = (type: proto.temporal.api.enums.v1.EventType): number => eventsOf(first, type).length;
  assert.equal(first[first.length - 1]?.eventType, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, 'the first run continued as new');
  assert.ok(first.length >= CAN_EVENTS, `${first.length} events`);
  assert.equal(count(EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) + count(EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT), 0, 'no failed workflow task');
  // Drained: every child the run started had completed before it continued as new.
  const started = count(EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED) - count(EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED);
  assert.ok(started > CAN_EVENTS / 40, `${started} children`);
  assert.equal(count(EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED), started);
  // Rounds went on while draining, their runs started by the claim.
  const firstRunClaims = claims.filter((claim) => claim.tokenPrefix.startsWith(`${firstRunId}.`));
  assert.ok(
    firstRunClaims.some((claim) => claim.startRuns === true),
    'a round while draining asked the claim to start its runs',
  );
  // The next run carries on counting rounds where the first stopped.
  const lastRound = Number(firstRunClaims[firstRunClaims.length - 1]?.tokenPrefix.split('.')[1]);
  const nextClaim = claims.find((claim) => !claim.tokenPrefix.startsWith(`${firstRunId}.`));
  assert.equal(Number(nextClaim?.tokenPrefix.split('.')[1]), lastRound + 1);
  assert.equal(nextClaim?.startRuns, undefined, 'the new run starts children again');
});

test('continue-as-new waits for a running request-check update, rejects new ones meanwhile (clients retry), and carries a signalled one to the next run', async () => {
  const taskQueues = testTaskQueues('sched-can-updates');
  // Card ids (numeric, as the request validator requires): one slow request, fast ones, a signalled one.
  const [SLOW, FAST, SIGNALLED] = ['901', '902', '903'];
  let releaseSlow: (() => void) | undefined;
  const slowStarted = new Promise<void>((resolve) => (releaseSlow = resolve));
  let slowRelease: (() => void) | undefined;
  const slowDone = new Promise<void>((resolve) => (slowRelease = resolve));
  const served: { cardId: string; runId: string }[] = [];
  let stop = false;
  const activities: SchedulerActivities = {
    async claimRound() {
      return stop ? STOP : claimedRound([]);
    },
    async releaseClaims() {
      return 0;
    },
    async requestCheck(input) {
      served.push({ cardId: input.request.cardId, runId: Context.current().info.workflowExecution?.runId ?? '' });
      if (input.request.cardId === SLOW) {
        releaseSlow?.();
        await slowDone;
      }
      return { status: 'requested', requested: 1 };
    },
    async requeueDuePriorityItems() {
      return 0;
    },
  };
  const worker = await createTestWorker(env, taskQueues.control, activities);
  const workflowId = uniqueName('sched-can-updates');
  const handle = await env.client.workflow.start(carrierScheduler, {
    taskQueue: taskQueues.control,
    workflowId,
    // A small history: the run wants to roll over within a few ticks.
    args: [{ ...schedulerArgs(taskQueues, uniqueName('p')), maxHistoryEvents: 40 }],
  });
  const firstRunId = (await handle.describe()).runId;
  await worker.runUntil(async () => {
    const request = (cardId: string) => ({ cardId, types: ['card_status' as const], lane: 'priority' as const, actor: 'test' });
    // An update whose activity runs until the test lets it finish: the run cannot close meanwhile.
    const slow = handle.executeUpdate(requestCheckUpdate, { args: [request(SLOW)] });
    await slowStarted;
    // Further updates are accepted until the run decides to close, then rejected with the retry type.
    let rejected: unknown;
    for (let i = 0; i < 120 && rejected === undefined; i += 1) {
      try {
        await handle.executeUpdate(requestCheckUpdate, { args: [request(FAST)] });
      } catch (error) {
        rejected = error;
      }
    }
    assert.ok(rejected instanceof WorkflowUpdateFailedError, String(rejected));
    assert.ok(rejected.cause instanceof ApplicationFailure && rejected.cause.type === SCHEDULER_CONTINUING_AS_NEW, String(rejected.cause));
    // A signal cannot be rejected: queued, it travels to the next run.
    await handle.signal(requestCheckSignal, request(SIGNALLED));
    slowRelease?.();
    assert.deepEqual(await slow, { status: 'requested', requested: 1 });
    for (let i = 0; i < 60 && !served.some((s) => s.cardId === SIGNALLED); i += 1) await env.sleep('1 s');
    stop = true;
    return handle.result();
  });
  // The slow update finished in the run that accepted it; the signalled request was served by the next run.
  assert.equal(served.find((s) => s.cardId === SLOW)?.runId, firstRunId);
  const signalled = served.filter((s) => s.cardId === SIGNALLED);
  assert.equal(signalled.length, 1, JSON.stringify(served));
  assert.notEqual(signalled[0]?.runId, firstRunId, 'served by the run after the continue-as-new');
  const firstEvents = (await env.client.workflow.getHandle(workflowId, firstRunId).fetchHistory()).events ?? [];
  assert.equal(firstEvents[firstEvents.length - 1]?.eventType, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW);
});
