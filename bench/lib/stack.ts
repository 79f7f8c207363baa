/**
 * One orchestration stack per scenario, like the tests' stack (the parts both use:
 * testkit/isolatedStack.ts): a fresh PostgreSQL schema, a fresh Redis namespace, the
 * simulator (the instrument) in a process of its own, so that it stamps arrivals on its own clock
 * and not on the workers' loaded event loop, and the four workers on task queues unique to the run, all
 * against the running Temporal dev server. Everything is removed on close, so runs never see each
 * other's rows, keys or workflows.
 */
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import type { RedisConnection } from '../../src/redis/connection.js';
import { deleteMatching } from '../../testkit/redis.js';
import type { Config } from '../../src/config/index.js';
import { createRuntimeDeps, type RuntimeDeps } from '../../src/runtime/deps.js';
import { WORKER_KINDS } from '../../src/workers/createWorker.js';
import { createPollingServices, type PollingServices } from '../../src/app/pollingServices.js';
import { startSimulatorProcess, type SimulatorProcess } from '../../src/simulator/childProcess.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { migrate } from '../../src/db/migrate.js';
import { ensurePollingControl, wakeSchedulers, type OrchestrationRef } from '../../src/app/temporalControl.js';
import { stackConfig, stackTaskQueues, startStackWorkers, terminateRunning, type StartedStackWorkers } from '../../testkit/isolatedStack.js';

/** close(): at most this many visibility sweeps, this far apart (~10 s when runs keep appearing). */
const SWEEP_PASSES = 10;
const SWEEP_PAUSE_MS = 1000;

export interface BenchStack {
  readonly config: Config;
  readonly pool: Pool;
  readonly schema: string;
  readonly namespace: string;
  readonly deps: RuntimeDeps;
  /** Configured and read over its /sim endpoints. */
  readonly simulator: SimulatorProcess;
  readonly client: Client;
  readonly ref: OrchestrationRef;
  readonly services: PollingServices;
  /** Starts the four workers and pollingControl (the orchestration begins polling). */
  startOrchestration(): Promise<void>;
  close(): Promise<void>;
}

export interface StackOptions {
  /** Card worker workflow slots (the config default is what production runs with). */
  readonly workerOverrides?: Partial<Pick<Config, 'WORKER_CARD_MAX_WORKFLOWS' | 'WORKER_CARD_MAX_ACTIVITIES' | 'WORKER_GATEWAY_MAX_ACTIVITIES'>>;
  /**
   * How card runs start (child workflows or client starts from the claim activity). The stack's
   * Config reaches createWorker as it is, so the workers of this stack run in that mode whatever
   * the environment says.
   */
  readonly cardStartMode?: Config['CARD_START_MODE'];
  /**
   * SCHEDULER_LOOP. A scenario that names a start mode compares the workflow loop's ways of starting
   * runs (a claim loop activity starts them with the client whatever the mode): `workflow` unless given.
   */
  readonly schedulerLoop?: Config['SCHEDULER_LOOP'];
  /** What one card run carries (CARD_RUN_SHAPE: one card, or a batch of up to CARD_BATCH_SIZE), likewise. */
  readonly cardRunShape?: Config['CARD_RUN_SHAPE'];
  /** pollingControl's reconcile period (default 2 s: the scenarios' accounts exist before it starts). */
  readonly reconcileEveryMs?: number;
}

/** The SDK runtime is process-wide and can be installed once: every bench worker shares it (worker logs at ERROR). */
export { installQuietWorkerRuntime as installWorkerRuntime } from '../../testkit/isolatedStack.js';

export async function createBenchStack(base: Config, label: string, options: StackOptions = {}): Promise<BenchStack> {
  const id = `bench-${label}-${randomUUID().slice(0, 8)}`;
  const schema = id.replace(/-/g, '_');
  const namespace = `${id}:`;
  const taskQueues = stackTaskQueues(id);
  const simulator = await startSimulatorProcess({ host: '127.0.0.1', port: 0, seed: 42, logLevel: 'warn' });
  const config = stackConfig(
    {
      ...base,
      ...options.workerOverrides,
      ...(options.cardStartMode ? { CARD_START_MODE: options.cardStartMode, SCHEDULER_LOOP: options.schedulerLoop ?? 'workflow' } : {}),
      ...(options.schedulerLoop ? { SCHEDULER_LOOP: options.schedulerLoop } : {}),
      ...(options.cardRunShape ? { CARD_RUN_SHAPE: options.cardRunShape } : {}),
    },
    { gatewayUrl: simulator.url, schema, namespace, taskQueues, workflowIdPrefix: `${id}-` },
  );
  const pool = createPool({ url: config.DATABASE_URL, schema, max: 10, applicationName: id.slice(0, 60) });
  await migrate(pool, schema);
  const deps = await createRuntimeDeps(config, { namespace, schema, name: id.slice(0, 60) });
  const connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS });
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const ref: OrchestrationRef = { client, taskQueues, workflowIdPrefix: config.WORKFLOW_ID_PREFIX };
  const services = createPollingServices({ deps, namespace, wakeSchedulers: (carrierIds) => wakeSchedulers(ref, carrierIds) });
  let workers: StartedStackWorkers | undefined;

  return {
    config,
    pool,
    schema,
    namespace,
    deps,
    simulator,
    client,
    ref,
    services,
    async startOrchestration() {
      workers = await startStackWorkers({ config, deps, services, taskQueues }, WORKER_KINDS);
      await ensurePollingControl(ref, { reconcileEveryMs: options.reconcileEveryMs ?? 2000 });
    },
    async close() {
      // Workers first: terminating runs they are still completing makes the SDK core log warnings.
      if (workers) {
        for (const worker of workers.workers) if (worker.getState() === 'RUNNING') worker.shutdown();
        await Promise.allSettled(workers.runs);
        await workers.connection.close();
      }
      // Leave nothing running on the shared server: this run's schedulers and cards end with it.
      // Visibility lags (seconds on the cluster's PostgreSQL visibility, under load): runs started just
      // before the workers stopped show up late, so sweep until two passes in a row find none.
      let quiet = 0;
      for (let pass = 0; pass < SWEEP_PASSES && quiet < 2; pass += 1) {
        const found = await terminateRunning(client, config.WORKFLOW_ID_PREFIX, 'bench finished');
        quiet = found === 0 ? quiet + 1 : 0;
        if (quiet < 2) await new Promise((resolve) => setTimeout(resolve, SWEEP_PAUSE_MS));
      }
      await connection.close();
      await simulator.close();
      await deleteNamespace(deps.redis, namespace);
      await deps.close();
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await pool.end();
    },
  };
}

/** Deletes every key of a namespace (SCAN + UNLINK: never blocks the shared Redis for long). */
export async function deleteNamespace(redis: RedisConnection, namespace: string): Promise<void> {
  await deleteMatching(redis, `${namespace}*`, 5000);
}
