/**
 * A whole orchestration stack for one test: fresh PostgreSQL schema, fresh Redis namespace, a
 * gateway simulator in a process of its own, and the four workers on task queues unique to the
 * test — all on the real Temporal dev server, Redis and PostgreSQL.
 */
import type { Worker } from '@temporalio/worker';
import { Client, Connection } from '@temporalio/client';
import { loadConfig, type Config, type TaskQueues } from '../src/config/index.js';
import { createRuntimeDeps, type RuntimeDeps } from '../src/runtime/deps.js';
import { WORKER_KINDS, type WorkerKind } from '../src/workers/createWorker.js';
import { createPollingServices } from '../src/app/pollingServices.js';
import { startSimulatorProcess, type SimulatorProcess } from '../src/simulator/childProcess.js';
import { createTestDb, type TestDb } from './db.js';
import { createTestRedis, type TestRedis } from './redis.js';
import { uniqueName } from './temporal.js';
import { createControlActivities, type ControlActivityDeps } from '../src/activities/control.js';
import { createCardActivities, type CardActivities } from '../src/activities/card.js';
import { createPackageEvaluator } from '../src/activities/packageEvaluation.js';
import { stackConfig, stackTaskQueues, startStackWorkers, terminateRunning } from './isolatedStack.js';
import { wakeSchedulers, type OrchestrationRef } from '../src/app/temporalControl.js';
import { pollingControlWorkflowId } from '../src/workflow-safe/workflowIds.js';
import type { ControlStatus } from '../src/workflow-safe/loopStatus.js';
import { controlStatusQuery } from '../src/workflows/messages.js';
import { buildApiServer } from '../src/api/server.js';
import type { FastifyInstance } from 'fastify';

export interface Stack {
  readonly config: Config;
  readonly db: TestDb;
  readonly redis: TestRedis;
  readonly deps: RuntimeDeps;
  /** Configured and read over its /sim endpoints. */
  readonly simulator: SimulatorProcess;
  readonly client: Client;
  readonly taskQueues: TaskQueues;
  readonly services: ReturnType<typeof createPollingServices>;
  /** Runs the workers of the given kinds until stop() (all four by default). */
  startWorkers(kinds?: readonly WorkerKind[]): Promise<RunningWorkers>;
  close(): Promise<void>;
}

export interface RunningWorkers {
  readonly workers: readonly Worker[];
  stop(): Promise<void>;
}

/** `config` overrides settings of the stack's workers (e.g. GATEWAY_STEPS, CARD_START_MODE). */
export async function createStack(label: string, options: { seed?: number; config?: Partial<Config> } = {}): Promise<Stack> {
  const base = loadConfig();
  const prefix = uniqueName(label);
  const taskQueues = stackTaskQueues(prefix);
  const db = await createTestDb(label);
  const redis = await createTestRedis(label);
  // Its own process: it stamps arrivals on its own event loop, not on the one of the workers under
  // test (which runs late when they are busy), so its one-second windows are the wire's.
  const simulator = await startSimulatorProcess({ host: '127.0.0.1', port: 0, seed: options.seed ?? 42, logLevel: 'warn' });
  const config: Config = {
    ...stackConfig(base, { gatewayUrl: simulator.url, schema: db.schema, namespace: redis.namespace, taskQueues, workflowIdPrefix: `${prefix}-` }),
    // In-process workers start in ~0.1 s of CPU instead of ~2 s (src/config/index.ts); the tests
    // that spawn worker processes (crash, deploy, faults, cluster) keep the production default.
    WORKFLOW_SANDBOX_THREAD: 'main',
    ...options.config,
  };
  const deps = await createRuntimeDeps(config, {
    namespace: redis.namespace,
    schema: db.schema,
    name: `test-${label}`.slice(0, 40).replace(/[^a-zA-Z0-9_-]/g, '_'),
  });
  const connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS });
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  // Lifecycle writes wake the schedulers they make due sooner, as in the API and worker processes.
  const services = createPollingServices({
    deps,
    namespace: redis.namespace,
    wakeSchedulers: (carrierIds) => wakeSchedulers({ client, taskQueues, workflowIdPrefix: config.WORKFLOW_ID_PREFIX }, carrierIds),
  });
  const running: RunningWorkers[] = [];
  return {
    config,
    db,
    redis,
    deps,
    simulator,
    client,
    taskQueues,
    services,
    async startWorkers(kinds = WORKER_KINDS) {
      const { workers, runs, connection: nativeConnection } = await startStackWorkers({ config, deps, services, taskQueues }, kinds);
      let stopped: Promise<void> | undefined;
      const handle: RunningWorkers = {
        workers,
        stop() {
          stopped ??= (async () => {
            for (const worker of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
            await Promise.allSettled(runs);
            await nativeConnection.close();
          })();
          return stopped;
        },
      };
      running.push(handle);
      return handle;
    },
    async close() {
      // Leave nothing running on the shared server: this stack's schedulers and cards end with it.
      await terminateRunning(client, config.WORKFLOW_ID_PREFIX, 'test finished');
      for (const handle of running) await handle.stop();
      await connection.close();
      await simulator.close();
      await deps.close();
      await redis.close();
      await db.close();
    },
  };
}

/** The environment that makes a project entry point (`src/workers/*.ts`, `src/api/main.ts`) run as part of this stack. */
export function stackEnv(stack: Stack): Record<string, string> {
  return {
    TEMPORAL_ADDRESS: stack.config.TEMPORAL_ADDRESS,
    DATABASE_URL: stack.config.DATABASE_URL,
    DATABASE_SCHEMA: stack.db.schema,
    REDIS_URL: stack.config.REDIS_URL,
    REDIS_KEY_PREFIX: stack.redis.namespace,
    TASK_QUEUE_CONTROL: stack.taskQueues.control,
    TASK_QUEUE_CARD: stack.taskQueues.card,
    TASK_QUEUE_CARD_PRIORITY: stack.taskQueues.cardPriority,
    TASK_QUEUE_GATEWAY: stack.taskQueues.gateway,
    TASK_QUEUE_INGEST: stack.taskQueues.ingest,
    WORKFLOW_ID_PREFIX: stack.config.WORKFLOW_ID_PREFIX,
    GATEWAY_URL: stack.simulator.url,
    // A process of this stack claims as its in-process workers do.
    SCHEDULER_LOOP: stack.config.SCHEDULER_LOOP,
  };
}

/** The control activities over the stack's own stores, called directly (outside a worker). */
export function stackControlActivities(stack: Stack, extra: Partial<ControlActivityDeps> = {}): ReturnType<typeof createControlActivities> {
  return createControlActivities({
    pool: stack.deps.pool,
    store: stack.deps.store,
    limiter: stack.deps.limiter,
    reference: stack.deps.reference,
    requests: stack.services.requests,
    modes: stack.services.modes,
    ...extra,
  });
}

/** The card worker's bookkeeping activities over the stack's own stores, called directly (outside a worker). */
export function stackCardActivities(stack: Stack): CardActivities {
  return createCardActivities({
    pool: stack.deps.pool,
    store: stack.deps.store,
    reference: stack.deps.reference,
    packages: createPackageEvaluator(stack.deps.pool),
    priority: stack.services.priority,
  });
}

/** pollingControl's status (its query); the product reads only the schedulers' (src/app/temporalControl.ts). */
export async function controlStatus(ref: OrchestrationRef): Promise<ControlStatus> {
  return ref.client.workflow.getHandle(pollingControlWorkflowId(ref.workflowIdPrefix)).query(controlStatusQuery);
}

/** The API over the stack's own stores and orchestration (not listening: `inject`, or `listen` for real HTTP). */
export function stackApi(stack: Stack): Promise<FastifyInstance> {
  return buildApiServer(
    {
      config: stack.config,
      deps: stack.deps,
      services: stack.services,
      orchestration: { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX },
    },
    { logLevel: 'silent' },
  );
}
