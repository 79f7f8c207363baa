/**
 * pollingControl on the time-skipping test server with scripted control activities: it outlives a
 * mode read that keeps failing (each failure after the activity's own ten attempts, then the loop's
 * backoff of 2, 4, 8 s — minutes of retries on skipped time), then has its activity start the
 * missing schedulers with the client at every reconcile, and starts no child itself. (The starter:
 * test/app/schedulerStarter.test.ts.)
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ApplicationFailure } from '@temporalio/activity';
import proto from '@temporalio/proto';
import { pollingControl } from '../../src/workflows/pollingControl.js';
import { controlStatusQuery, reconcileSignal } from '../../src/workflows/messages.js';
import { timeSkippingEnv, type TimeSkippingEnvironment } from '../../testkit/timeSkipping.js';
import { createTestWorker, testTaskQueues, type ControlActivities } from '../../testkit/workflowTest.js';
import { uniqueName } from '../../testkit/temporal.js';

const { temporal } = proto;
const EventType = temporal.api.enums.v1.EventType;

let env: TimeSkippingEnvironment;
before(async () => {
  env = await timeSkippingEnv();
});
after(async () => {
  await env?.teardown();
});

type ControlLoopActivities = Pick<
  ControlActivities,
  | 'readMode'
  | 'switchMode'
  | 'ensureRedisIntact'
  | 'listEnabledCarriers'
  | 'listSchedulersToStart'
  | 'startMissingSchedulers'
  | 'claimRound'
  | 'releaseClaims'
  | 'requestCheck'
  | 'requeueDuePriorityItems'
>;

test('pollingControl: outlives failing mode reads with backoff, then starts the missing schedulers through its activity, no child', async () => {
  const taskQueues = testTaskQueues('control-loop');
  const prefix = `${uniqueName('p')}-`;
  let readFailures = 3;
  let readAttempts = 0;
  let reconciles = 0;
  const templates: unknown[] = [];
  const activities: ControlLoopActivities = {
    async readMode() {
      readAttempts += 1;
      if (readFailures > 0) {
        // The last of the activity's ten attempts ends one failure of the loop.
        if (readAttempts % 10 === 0) readFailures -= 1;
        throw ApplicationFailure.retryable('PostgreSQL away', 'unavailable');
      }
      return 'carrier';
    },
    async switchMode() {
      return { changed: false };
    },
    async ensureRedisIntact() {
      return false;
    },
    async listEnabledCarriers() {
      throw new Error('runs from the control-start-missing-schedulers patch on ask listSchedulersToStart');
    },
    async listSchedulersToStart() {
      throw new Error('runs from the control-start-schedulers-by-client patch on ask startMissingSchedulers');
    },
    async startMissingSchedulers(template) {
      reconciles += 1;
      templates.push(template);
      return { enabled: ['7', '8'], started: reconciles === 1 ? 2 : 0, failed: 0 };
    },
    // The schedulers it starts: idle (legacy mode) rounds, so they stay running.
    async claimRound() {
      return { kind: 'idle', reason: 'legacy_mode' };
    },
    async releaseClaims() {
      return 0;
    },
    async requestCheck() {
      return { status: 'requested', requested: 1 };
    },
    async requeueDuePriorityItems() {
      return 0;
    },
  };
  const worker = await createTestWorker(env, taskQueues.control, activities);
  const handle = await env.client.workflow.start(pollingControl, {
    taskQueue: taskQueues.control,
    workflowId: uniqueName('control'),
    args: [{ taskQueues, workflowIdPrefix: prefix, reconcileEveryMs: 3_600_000 }],
  });
  try {
    await worker.runUntil(async () => {
      // Three failures of ten attempts each (backoff up to 30 s between attempts), then 2 + 4 + 8 s.
      for (let waited = 0; reconciles === 0 && waited < 20; waited += 1) await env.sleep('1 minute');
      assert.equal(reconciles, 1, 'reconciled after the mode read succeeded');
      const status = await handle.query(controlStatusQuery);
      assert.deepEqual([status.mode, [...status.carriers].sort()], ['carrier', ['7', '8']]);
      assert.equal(status.lastFailure?.consecutive, 0);
      // A second reconcile finds both schedulers running: normal, not a failure.
      await handle.signal(reconcileSignal);
      for (let waited = 0; reconciles === 1 && waited < 20; waited += 1) await env.sleep('1 s');
      assert.equal(reconciles, 2);
      assert.equal((await handle.query(controlStatusQuery)).lastFailure?.consecutive, 0);
    });
    assert.equal(readAttempts, 31, 'three failures of ten attempts, then the read that answered');
    const events = (await handle.fetchHistory()).events ?? [];
    const sleeps = events
      .filter((event) => event.eventType === EventType.EVENT_TYPE_TIMER_STARTED)
      .map((event) => Number(event.timerStartedEventAttributes?.startToFireTimeout?.seconds ?? 0));
    assert.deepEqual(sleeps.slice(0, 3), [2, 4, 8], 'the loop backed off 2, 4, 8 s between failed reads');
    const children = events.filter((event) => event.eventType === EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED);
    assert.equal(children.length, 0, 'no scheduler started as a child');
    assert.deepEqual(
      templates,
      [
        { taskQueues, workflowIdPrefix: prefix },
        { taskQueues, workflowIdPrefix: prefix },
      ],
      'every reconcile asks for the missing schedulers',
    );
    // A control worker killed mid-call holds the loop only until its call times out: a minute for
    // the reads, the heartbeat timeout for the Redis check (which may rebuild for minutes) and for
    // the scheduler starts (a minute for a fleet; with only their 5-minute timeout, the fault suite
    // saw a kill -9 leave a Redis flush unrebuilt for over two minutes).
    const scheduled = new Map<string, { startToClose: number; heartbeat: number }>();
    for (const event of events) {
      const attributes = event.activityTaskScheduledEventAttributes;
      if (!attributes?.activityType?.name) continue;
      scheduled.set(attributes.activityType.name, {
        startToClose: Number(attributes.startToCloseTimeout?.seconds ?? 0),
        heartbeat: Number(attributes.heartbeatTimeout?.seconds ?? 0),
      });
    }
    assert.deepEqual(Object.fromEntries(scheduled), {
      readMode: { startToClose: 60, heartbeat: 0 },
      ensureRedisIntact: { startToClose: 1800, heartbeat: 30 },
      startMissingSchedulers: { startToClose: 300, heartbeat: 30 },
    });
    assert.equal((await handle.describe()).status.name, 'RUNNING');
  } finally {
    await handle.terminate('test over').catch(() => undefined);
  }
});
