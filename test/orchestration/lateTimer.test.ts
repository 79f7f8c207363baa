/**
 * carrierScheduler on a server whose timers fire late: the next claim round starts at the first
 * workflow task past the tick's end, whatever woke the run, not when the late timer fires. Under
 * overload the dev server fired the busiest scheduler's one-second tick timers up to 1.46 s late
 * (one not within 3 s) while child completions woke the run every 50-100 ms: each late timer was
 * a gap in its claiming.
 *
 * The scheduler alone on the real Temporal dev server, its control activities scripted (every
 * claim finds nothing due); its timers made a thousand times longer by a workflow interceptor
 * (test/fixtures/lateTimerInterceptors.ts); a `configChanged` signal, which does not itself wake
 * the loop, stands in for the child completions.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import proto from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { claimedRound } from '../../testkit/claimRounds.js';
import { connectTestEnv, uniqueName } from '../../testkit/temporal.js';
import { waitFor } from '../../testkit/seed.js';
import { installQuietWorkerRuntime } from '../../testkit/isolatedStack.js';
import { testWorkflowBundle } from '../../testkit/workflowBundle.js';
import { testTaskQueues, type ControlActivities } from '../../testkit/workflowTest.js';
import { sandboxThreadOptions } from '../../src/workers/createWorker.js';
import { WORKFLOWS_PATH } from '../../src/workers/workflowBundle.js';
import { carrierScheduler } from '../../src/workflows/carrierScheduler.js';
import { configChangedSignal } from '../../src/workflows/messages.js';

const { temporal } = proto;
const EventType = temporal.api.enums.v1.EventType;

let env: TestWorkflowEnvironment;
before(async () => {
  installQuietWorkerRuntime();
  env = await connectTestEnv();
});
after(async () => {
  await env?.teardown();
});

/** Longest real time to wait for a claim (generous: the machine is shared; the late timer would take 1 000 s). */
const CLAIM_WITHIN_MS = 60_000;
const TICK_MS = 1000;

test('a scheduler whose tick timer fires late claims at the first workflow task past the tick', async (t) => {
  const taskQueues = testTaskQueues('sched-late-timer');
  const claims: number[] = [];
  const activities: Pick<ControlActivities, 'claimRound' | 'releaseClaims' | 'requestCheck' | 'requeueDuePriorityItems'> = {
    async claimRound() {
      claims.push(Date.now());
      return claimedRound([]);
    },
    async releaseClaims() {
      return 0;
    },
    async requestCheck() {
      return { status: 'requested', requested: 0 };
    },
    async requeueDuePriorityItems() {
      return 0;
    },
  };
  const worker = await Worker.create({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue: taskQueues.control,
    workflowBundle: await testWorkflowBundle({
      workflowsPath: WORKFLOWS_PATH,
      workflowInterceptorModules: [fileURLToPath(new URL('../fixtures/lateTimerInterceptors.ts', import.meta.url))],
    }),
    activities,
    ...sandboxThreadOptions('main'),
  });
  const prefix = `${uniqueName('late')}-`;
  const handle = await env.client.workflow.start(carrierScheduler, {
    taskQueue: taskQueues.control,
    workflowId: `${prefix}scheduler`,
    args: [{ carrierId: '7', taskQueues, workflowIdPrefix: prefix, tickMs: TICK_MS }],
  });
  t.after(() => handle.terminate('test over').catch(() => undefined));
  await worker.runUntil(async () => {
    await waitFor('the first claim', async () => claims.length >= 1, CLAIM_WITHIN_MS, 20);
    // Past the first tick's end (its timer now fires in 1 000 s), a task that is no wake-up of its own.
    await new Promise((resolve) => setTimeout(resolve, 2 * TICK_MS));
    assert.equal(claims.length, 1, 'no second claim before anything woke the run');
    await handle.signal(configChangedSignal);
    await waitFor('the claim after the signal', async () => claims.length >= 2, CLAIM_WITHIN_MS, 20);
  });

  const events = (await handle.fetchHistory()).events ?? [];
  const firstAfter = (type: proto.temporal.api.enums.v1.EventType, from = -1): number => events.findIndex((e, i) => i > from && e.eventType === type);
  const signalAt = firstAfter(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED);
  assert.ok(signalAt > 0, 'the signal is in the history');
  assert.ok(firstAfter(EventType.EVENT_TYPE_MARKER_RECORDED, signalAt) > signalAt, 'a (claim) marker follows the signal');
  assert.equal(firstAfter(EventType.EVENT_TYPE_TIMER_FIRED), -1, 'no timer fired: the round started at the signal’s task');
  assert.ok(firstAfter(EventType.EVENT_TYPE_TIMER_CANCELED) > signalAt, 'the late tick timer was cancelled once the round began');
});
