/**
 * Workflow tests with stub activities: the project's workflows (bundled once per test file) on a
 * worker of the test's own, its activities the test's recorders, typed from the activity factories.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { fileURLToPath } from 'node:url';
import type { BookkeepingActivities } from '../src/activities/bookkeepingBatch.js';
import type { ControlActivities } from '../src/activities/control.js';
import type { GatewayActivities } from '../src/activities/gateway.js';
import type { TaskQueueNames } from '../src/workflow-safe/taskQueues.js';
import { WORKFLOWS_PATH } from '../src/workers/workflowBundle.js';
import { sandboxThreadOptions } from '../src/workers/createWorker.js';
import { installQuietWorkerRuntime } from './isolatedStack.js';
import { bundleOnce, uniqueName } from './temporal.js';
import { testWorkflowBundle } from './workflowBundle.js';

/** Every activity a card run calls (cardCheck, cardBatch's per-card calls), typed from the factories. */
export type CardRunActivities = BookkeepingActivities & GatewayActivities;
export type { ControlActivities };

/** One call an activity stub saw: its input and the attempt it was (1 for the first). */
export interface Call<I> {
  readonly input: I;
  readonly attempt: number;
}

/** The attempt of the activity running now (local or not). */
export function attempt(): number {
  return Context.current().info.attempt;
}

/** Task queues of one test: every kind on the test's one queue, so one worker serves them all. */
export function testTaskQueues(label: string): TaskQueueNames {
  const queue = uniqueName(label);
  return { control: queue, card: queue, cardPriority: queue, gateway: queue, ingest: queue };
}

/**
 * A worker on `taskQueue` running the project's workflows with `activities` (and the workflow
 * interceptor modules given, test/fixtures/*Interceptors.ts). The worker runtime is made quiet:
 * the failures the tests provoke are the point, the SDK's warnings about them noise.
 */
export async function createTestWorker(
  env: TestWorkflowEnvironment,
  taskQueue: string,
  activities: object,
  interceptors: readonly URL[] = [],
): Promise<Worker> {
  installQuietWorkerRuntime();
  return Worker.create({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue,
    workflowBundle:
      interceptors.length === 0
        ? await bundleOnce(WORKFLOWS_PATH)
        : await testWorkflowBundle({ workflowsPath: WORKFLOWS_PATH, workflowInterceptorModules: interceptors.map((url) => fileURLToPath(url)) }),
    activities,
    // The sandbox on this thread: a worker per test, each ~2 s of CPU less to start (src/config/index.ts).
    ...sandboxThreadOptions('main'),
  });
}

/** Reports each phase's real time as a test diagnostic: where a workflow test's seconds go. */
export function stopwatch(t: { diagnostic(message: string): void }): (what: string) => void {
  let last = Date.now();
  return (what) => {
    const now = Date.now();
    t.diagnostic(`${what}: ${now - last} ms`);
    last = now;
  };
}

/**
 * Card-run activities for a test that looks only at how runs start: `prepareExecution` is the
 * test's (usually ending the run, `{ kind: 'lost' }`); any later step fails the test's run for good.
 */
export function preparingOnly(prepareExecution: CardRunActivities['prepareExecution']): CardRunActivities {
  const unused = async (): Promise<never> => {
    throw ApplicationFailure.nonRetryable('not expected in this test');
  };
  return {
    prepareExecution,
    releaseClaim: unused,
    finishNotPolled: unused,
    finishExecution: unused,
    recordExecution: unused,
    enqueueRecord: unused,
    checkGateway: unused,
  };
}
