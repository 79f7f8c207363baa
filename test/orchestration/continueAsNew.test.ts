/**
 * carrierScheduler continuing as new every few requests while request-checks keep arriving, both
 * as the update (through the API's client, temporalControl.requestCheck, which retries an update
 * the closing run refused against the next run) and as the fire-and-forget signal (queued ones
 * travel to the next run): every request is handed to the request-check activity exactly once.
 * The scheduler alone on the real Temporal dev server, its control activities scripted (the claim
 * finds nothing due); no Redis, PostgreSQL or card runs.
 *
 * Not on the time-skipping test server: its 1.31 build mishandles an update delivered again after
 * a workflow task failed because it arrived while the run continued as new (UNHANDLED_COMMAND):
 * completing the update fails there ("Invalid Transition{from=NONE, action=COMPLETE}") on every
 * attempt, and the run is stuck — the race this test is about.
 *
 * What a served request becomes — a priority item, the card run from the priority lane, the item
 * settled — is test/orchestration/requestCheck.test.ts, on the whole stack.
 */
import { claimedRound } from '../../testkit/claimRounds.js';
import { after, before, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import assert from 'node:assert/strict';
import { Context } from '@temporalio/activity';
import { Client } from '@temporalio/client';
import type { ClaimRoundResult } from '../../src/workflow-safe/claimRound.js';
import type { RequestCheckInput } from '../../src/workflow-safe/requestCheck.js';
import { SCHEDULER_CONTINUING_AS_NEW } from '../../src/workflow-safe/requestCheck.js';
import { schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { carrierScheduler } from '../../src/workflows/carrierScheduler.js';
import { requestCheckSignal } from '../../src/workflows/messages.js';
import { requestCheck, type OrchestrationRef } from '../../src/app/temporalControl.js';
import { createTestWorker, stopwatch, testTaskQueues, type ControlActivities } from '../../testkit/workflowTest.js';
import { connectTestEnv, uniqueName } from '../../testkit/temporal.js';
import { installQuietWorkerRuntime } from '../../testkit/isolatedStack.js';

let env: TestWorkflowEnvironment;
before(async () => {
  // Before the connection creates the SDK runtime: the worker's warnings are noise here.
  installQuietWorkerRuntime();
  env = await connectTestEnv();
});
after(async () => {
  await env?.teardown();
});

/** Runs of the scheduler to see: three continue-as-new while requests are being sent. */
const RUNS_WANTED = 4;
/** A safety stop for the senders: the runs should have rolled over long before. */
const MAX_REQUESTS = 600;
/** Longest real time a request may take to be served (generous: the machine is shared). */
const SERVED_WITHIN_MS = 30_000;

async function waitUntil(what: string, done: () => boolean): Promise<void> {
  const started = Date.now();
  while (!done()) {
    if (Date.now() - started > SERVED_WITHIN_MS) throw new Error(`${what}: not within ${SERVED_WITHIN_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const IDLE: ClaimRoundResult = claimedRound([]);

interface Sent {
  readonly id: string;
  readonly via: 'update' | 'signal';
  /** How many scheduler runs had been seen when it was sent. */
  readonly runsBefore: number;
}

test('request-checks by update and by signal across three continue-as-new: each served exactly once', async (t) => {
  const phase = stopwatch(t);
  const taskQueues = testTaskQueues('sched-can-stream');
  const prefix = `${uniqueName('p')}-`;
  const served: { id: string; runId: string }[] = [];
  /** Scheduler runs that served requests sent as `via`. */
  const servingRuns = (via: Sent['via']): number => new Set(served.filter((s) => s.id.startsWith(via === 'update' ? 'u' : 's-')).map((s) => s.runId)).size;
  let stop = false;
  const activities: Pick<ControlActivities, 'claimRound' | 'releaseClaims' | 'requestCheck' | 'requeueDuePriorityItems'> = {
    async claimRound() {
      return stop ? { kind: 'stop', reason: 'carrier_disabled' } : IDLE;
    },
    async releaseClaims() {
      return 0;
    },
    async requestCheck(input) {
      served.push({ id: input.request.source ?? '', runId: Context.current().info.workflowExecution?.runId ?? '' });
      return { status: 'requested', requested: 1 };
    },
    async requeueDuePriorityItems() {
      return 0;
    },
  };
  const worker = await createTestWorker(env, taskQueues.control, activities);
  // The API's client, counting the updates a closing run refused (temporalControl.requestCheck sends them again).
  let refused = 0;
  const client = new Client({
    connection: env.connection,
    ...(env.namespace === undefined ? {} : { namespace: env.namespace }),
    interceptors: {
      workflow: [
        {
          async startUpdate(input, next) {
            const output = await next(input);
            if (output.outcome?.failure?.applicationFailureInfo?.type === SCHEDULER_CONTINUING_AS_NEW) refused += 1;
            return output;
          },
        },
      ],
    },
  });
  const ref: OrchestrationRef = { client, taskQueues, workflowIdPrefix: prefix };
  const workflowId = schedulerWorkflowId('7', prefix);
  // A small history: with ~8 events per request, a continue-as-new every few requests.
  const handle = await env.client.workflow.start(carrierScheduler, {
    taskQueue: taskQueues.control,
    workflowId,
    args: [{ carrierId: '7', taskQueues, workflowIdPrefix: prefix, maxHistoryEvents: 60 }],
  });
  const runIds = [handle.firstExecutionRunId];
  const sent: Sent[] = [];
  // Nothing of the test left running on the shared server, whatever happens.
  t.after(() => handle.terminate('test over').catch(() => undefined));
  await worker.runUntil(async () => {
    let done = false;
    const request = (id: string): RequestCheckInput => ({
      cardId: String(100 + (sent.length % 10)),
      types: ['card_status'],
      lane: 'priority',
      actor: 'test',
      source: id,
    });
    const updates = async (sender: number): Promise<void> => {
      for (let i = 0; !done && sent.length < MAX_REQUESTS; i += 1) {
        const id = `u${sender}-${i}`;
        const runsBefore = runIds.length;
        assert.deepEqual(await requestCheck(ref, '7', request(id)), { status: 'requested', requested: 1 }, id);
        sent.push({ id, via: 'update', runsBefore });
      }
    };
    const signals = async (): Promise<void> => {
      for (let i = 0; !done && sent.length < MAX_REQUESTS; i += 1) {
        const id = `s-${i}`;
        const runsBefore = runIds.length;
        await handle.signal(requestCheckSignal, request(id));
        sent.push({ id, via: 'signal', runsBefore });
        // One signal at a time: each new signal makes the server refuse a workflow task that would
        // close the run (newer events arrived), so a sender faster than a task's round trip would
        // keep the run from ever rolling over. It is served within a tick, or by the next run.
        await waitUntil(`signal ${id} served`, () => served.some((s) => s.id === id));
      }
    };
    // Enough seen: the runs rolled over, and each form was sent before and after the first
    // rollover and served by several runs. Waited for, not assumed after so many rollovers: on a
    // starved machine the first updates took so long that three rollovers came before the next
    // one was sent (ci4: 'update after the first continue-as-new').
    const enough = (): boolean =>
      runIds.length >= RUNS_WANTED &&
      (['update', 'signal'] as const).every(
        (via) => sent.some((s) => s.via === via && s.runsBefore === 1) && sent.some((s) => s.via === via && s.runsBefore > 1) && servingRuns(via) >= 2,
      );
    const watcher = async (): Promise<void> => {
      while (!enough() && sent.length < MAX_REQUESTS) {
        const { runId } = await env.client.workflow.getHandle(workflowId).describe();
        if (runId !== runIds[runIds.length - 1]) runIds.push(runId);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      done = true;
    };
    await Promise.all([updates(1), updates(2), signals(), watcher()]);
    phase(`${sent.length} requests sent, ${runIds.length} runs seen, ${refused} updates refused by a closing run and sent again`);
    stop = true;
    return handle.result();
  });
  phase('stopped');

  assert.ok(runIds.length >= RUNS_WANTED, `${runIds.length} runs after ${sent.length} requests`);
  // Exactly once each: none lost, none served twice (an update refused by a closing run never ran its activity).
  const servedIds = served.map((s) => s.id).sort();
  assert.deepEqual(servedIds, sent.map((s) => s.id).sort());
  // Both forms were sent before the first continue-as-new and after it, and served by several runs.
  for (const via of ['update', 'signal'] as const) {
    assert.ok(
      sent.some((s) => s.via === via && s.runsBefore === 1),
      `${via} before the first continue-as-new`,
    );
    assert.ok(
      sent.some((s) => s.via === via && s.runsBefore > 1),
      `${via} after the first continue-as-new`,
    );
    assert.ok(servingRuns(via) >= 2, `${via}s served by ${servingRuns(via)} runs`);
  }
});
