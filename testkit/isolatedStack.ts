/**
 * The parts every in-process orchestration stack on the shared services is made of, for the tests'
 * stack (testkit/orchestration.ts) and the bench's (bench/lib/stack.ts): task queues, Redis
 * namespace, schema and workflow ids unique to the stack, the four workers from the workflow bundle
 * the test processes share (testkit/workflowBundle.ts), and the sweep that leaves nothing of the stack running on the shared Temporal server.
 */
import { NativeConnection, Runtime, DefaultLogger, type Worker } from '@temporalio/worker';
import type { Client } from '@temporalio/client';
import type { Config, TaskQueues } from '../src/config/index.js';
import type { RuntimeDeps } from '../src/runtime/deps.js';
import { createWorkers, type WorkerKind } from '../src/workers/createWorker.js';
import { WORKFLOWS_PATH } from '../src/workers/workflowBundle.js';
import type { PollingServices } from '../src/app/pollingServices.js';
import { testWorkflowBundle } from './workflowBundle.js';

let runtimeInstalled = false;

/** Task queues of one stack: `<prefix>-control`, `<prefix>-card`, … */
export function stackTaskQueues(prefix: string): TaskQueues {
  return {
    control: `${prefix}-control`,
    card: `${prefix}-card`,
    cardPriority: `${prefix}-card-priority`,
    gateway: `${prefix}-gateway`,
    ingest: `${prefix}-ingest`,
  };
}

export interface StackPlace {
  /** The stack's gateway simulator. */
  readonly gatewayUrl: string;
  readonly schema: string;
  /** Redis key prefix. */
  readonly namespace: string;
  readonly taskQueues: TaskQueues;
  readonly workflowIdPrefix: string;
}

/** `base` with the stack's own gateway, schema, Redis namespace, task queues and workflow ids. */
export function stackConfig(base: Config, place: StackPlace): Config {
  return {
    ...base,
    GATEWAY_URL: place.gatewayUrl,
    DATABASE_SCHEMA: place.schema,
    REDIS_KEY_PREFIX: place.namespace,
    TASK_QUEUE_CONTROL: place.taskQueues.control,
    TASK_QUEUE_CARD: place.taskQueues.card,
    TASK_QUEUE_CARD_PRIORITY: place.taskQueues.cardPriority,
    TASK_QUEUE_GATEWAY: place.taskQueues.gateway,
    TASK_QUEUE_INGEST: place.taskQueues.ingest,
    WORKER_SHUTDOWN_GRACE_MS: 2000,
    WORKFLOW_ID_PREFIX: place.workflowIdPrefix,
  };
}

/**
 * The SDK runtime is process-wide and can be installed once. Worker logs at ERROR: expected
 * activity failures (error injection) and deferrals would drown the test or bench output.
 */
export function installQuietWorkerRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  Runtime.install({ logger: new DefaultLogger('ERROR') });
}

export interface StackWorkerSetup {
  readonly config: Config;
  readonly deps: RuntimeDeps;
  readonly services: PollingServices;
  readonly taskQueues: TaskQueues;
}

export interface StartedStackWorkers {
  readonly workers: Worker[];
  /** Each worker's run(), settled when it has stopped. */
  readonly runs: Promise<void>[];
  /** The workers' own connection: closed by the caller once they have stopped. */
  readonly connection: NativeConnection;
}

/** Starts the workers of the given kinds on a connection of their own (the bundle is built once for all processes). */
export async function startStackWorkers(setup: StackWorkerSetup, kinds: readonly WorkerKind[]): Promise<StartedStackWorkers> {
  installQuietWorkerRuntime();
  const workflowBundle = await testWorkflowBundle({ workflowsPath: WORKFLOWS_PATH });
  const { config, deps, services, taskQueues } = setup;
  const connection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS });
  const workers = (await Promise.all(kinds.map((kind) => createWorkers({ kind, config, connection, deps, services, workflowBundle, taskQueues })))).flat();
  return { workers, runs: workers.map((worker) => worker.run()), connection };
}

/** Terminates every running workflow whose id starts with `workflowIdPrefix`; how many were found. */
export async function terminateRunning(client: Client, workflowIdPrefix: string, reason: string): Promise<number> {
  let found = 0;
  for await (const execution of client.workflow.list({ query: `WorkflowId STARTS_WITH "${workflowIdPrefix}" AND ExecutionStatus = "Running"` })) {
    found += 1;
    await client.workflow
      .getHandle(execution.workflowId, execution.runId)
      .terminate(reason)
      .catch(() => undefined);
  }
  return found;
}
