/**
 * Runs the workers of the given kinds in this process until SIGINT/SIGTERM, then shuts down
 * gracefully: pollers stop, in-flight activities get the configured grace time to finish.
 */
import { NativeConnection, Runtime, type Worker } from '@temporalio/worker';
import type { WorkerDeploymentVersion } from '@temporalio/common';
import type { Config } from '../config/index.js';
import { createRuntimeDeps, type RuntimeDeps } from '../runtime/deps.js';
import { createProcessLogger, lifecycleLogger, type ProcessLogger } from '../runtime/logger.js';
import { PinoSdkLogger, SDK_LOG_LEVEL } from '../runtime/sdkLogger.js';
import { freePort, startMetricsServer } from '../runtime/metricsServer.js';
import { Client } from '@temporalio/client';
import { createPollingServices } from '../app/pollingServices.js';
import { wakeSchedulers } from '../app/temporalControl.js';
import type { SchedulerWaker } from '../lifecycle/apply.js';
import { createWorkers, type WorkerKind } from './createWorker.js';
import { loadProcessBundle } from './workflowBundle.js';
import { workerLiveness, workerReadiness } from './health.js';
import { keepPollingControlRunning } from './keepPollingControl.js';
import { taskQueues } from '../config/index.js';
import { keepLifecycleConverged } from '../lifecycle/convergenceLoop.js';
import { createLifecycleMetrics } from '../lifecycle/metrics.js';

export interface RunningWorkerSet {
  readonly workers: readonly Worker[];
  readonly deps: RuntimeDeps;
  /** The workers' connection to Temporal (its readiness probe asks it too). */
  readonly connection: NativeConnection;
  /** The worker-deployment version the workers poll as, when versioning is on. */
  readonly deploymentVersion: WorkerDeploymentVersion | undefined;
  /** Resolves when every worker has stopped. */
  readonly done: Promise<void>;
  shutdown(): Promise<void>;
}

export interface StartWorkersOptions {
  readonly logger?: ProcessLogger;
  /** host:port for the SDK's Prometheus exporter (Runtime-wide: only the first start of a process sets it). */
  readonly sdkMetricsAddress?: string;
}

let runtimeInstalled = false;

/**
 * The SDK Runtime writes through our pino logger: SDK and workflow/activity context logs, and
 * core's (Rust) logs forwarded at the same level instead of printed on their own.
 */
function installRuntime(config: Config, logger: ProcessLogger, sdkMetricsAddress: string | undefined): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const level = SDK_LOG_LEVEL[config.LOG_LEVEL];
  Runtime.install({
    logger: new PinoSdkLogger(logger),
    telemetryOptions: {
      logging: { filter: { core: level, other: 'ERROR' }, forward: {} },
      ...(sdkMetricsAddress ? { metrics: { prometheus: { bindAddress: sdkMetricsAddress } } } : {}),
    },
  });
}

function deploymentVersion(config: Config, codeHash: string): WorkerDeploymentVersion | undefined {
  if (config.WORKER_VERSIONING === 'off') return undefined;
  return { deploymentName: config.WORKER_DEPLOYMENT_NAME, buildId: config.WORKER_BUILD_ID === '' ? `wf-${codeHash}` : config.WORKER_BUILD_ID };
}

export async function startWorkers(config: Config, kinds: readonly WorkerKind[], options: StartWorkersOptions = {}): Promise<RunningWorkerSet> {
  const logger = options.logger ?? createProcessLogger(config, `workers-${kinds.join('-')}`);
  installRuntime(config, logger, options.sdkMetricsAddress);
  const deps = await createRuntimeDeps(config, { name: `workers-${kinds.join('-')}` });
  const connection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS });
  // Lifecycle writes here (the outbox relay, the reconcile, activities' events) wake the schedulers they make due sooner.
  const orchestration = {
    client: new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }),
    taskQueues: taskQueues(config),
    workflowIdPrefix: config.WORKFLOW_ID_PREFIX,
  };
  const wake: SchedulerWaker = (carrierIds) => wakeSchedulers(orchestration, carrierIds);
  const services = createPollingServices({ deps, wakeSchedulers: wake });
  // Activity-only processes need the bundle only for its hash: every process of one deployment
  // must poll as the same version (prebuilt: a file read; from sources: a bundling).
  const needsBundle = kinds.includes('control') || kinds.includes('card') || (config.WORKER_VERSIONING === 'on' && config.WORKER_BUILD_ID === '');
  const loaded = needsBundle ? await loadProcessBundle(config.WORKFLOW_BUNDLE_PATH) : undefined;
  const version = deploymentVersion(config, loaded?.codeHash ?? '');
  const workers = (
    await Promise.all(
      kinds.map((kind) =>
        createWorkers({
          kind,
          config,
          connection,
          deps,
          services,
          workflowBundle: loaded?.bundle ?? { code: '' },
          ...(version ? { deploymentVersion: version } : {}),
        }),
      ),
    )
  ).flat();
  // Whoever runs the control worker keeps pollingControl (and through it the schedulers) running.
  const keeper = kinds.includes('control')
    ? keepPollingControlRunning({
        connection,
        namespace: config.TEMPORAL_NAMESPACE,
        taskQueues: taskQueues(config),
        workflowIdPrefix: config.WORKFLOW_ID_PREFIX,
        log: (line) => logger.warn({ component: 'keepPollingControl' }, line),
      })
    : undefined;
  // ... and keeps Redis following the cards' lifecycle: the outbox relay and the periodic reconcile.
  if (kinds.includes('control')) {
    const convergence = keepLifecycleConverged({
      deps: { pool: deps.pool, store: deps.store, redis: deps.redis, namespace: config.REDIS_KEY_PREFIX, wakeSchedulers: wake },
      metrics: createLifecycleMetrics(deps.registry, deps.pool),
      relayIntervalMs: config.LIFECYCLE_OUTBOX_RELAY_INTERVAL_MS,
      reconcileIntervalMs: config.LIFECYCLE_RECONCILE_INTERVAL_MS,
      relay: {
        batchSize: config.LIFECYCLE_OUTBOX_BATCH_SIZE,
        retryBaseMs: config.LIFECYCLE_OUTBOX_RELAY_INTERVAL_MS,
        retryMaxMs: config.LIFECYCLE_OUTBOX_RETRY_MAX_MS,
      },
      log: (line) => logger.warn({ component: 'lifecycle' }, line),
    });
    deps.beforeClose(() => convergence.stop());
  }
  const done = Promise.allSettled(workers.map((worker) => worker.run())).then(async (results) => {
    keeper?.stop();
    await deps.runBeforeClose();
    await connection.close();
    await deps.close();
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  });
  let stopping: Promise<void> | undefined;
  return {
    workers,
    deps,
    connection,
    deploymentVersion: version,
    done,
    shutdown() {
      stopping ??= (async () => {
        for (const worker of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
        await done.catch(() => undefined);
      })();
      return stopping;
    },
  };
}

/**
 * Entry-point helper: start, serve `/metrics` and the health contract (`/livez`, `/readyz`,
 * `/healthz`; src/workers/health.ts), stop on the first SIGINT/SIGTERM,
 * exit non-zero if a worker failed or stopped on its own.
 *
 * PostgreSQL and Redis outages do not stop the workers (their connections log and recover; the
 * activities that meet the outage fail and are retried by Temporal), so this waits through them.
 */
export async function runWorkersUntilSignal(config: Config, kinds: readonly WorkerKind[]): Promise<void> {
  const logger = createProcessLogger(config, `workers-${kinds.join('-')}`);
  const lifecycle = lifecycleLogger(logger);
  // The SDK exporter listens on loopback only: its text is served merged into our /metrics.
  const sdkMetricsAddress = `127.0.0.1:${await freePort('127.0.0.1')}`;
  const running = await startWorkers(config, kinds, { logger, sdkMetricsAddress });
  let signalled = false;
  const healthSources = { workers: running.workers, deps: running.deps, temporal: running.connection, stopping: () => signalled };
  // A port already taken stops the process (after its workers), instead of running unobserved.
  const metrics = await startMetricsServer({
    host: config.WORKER_METRICS_HOST,
    port: config.WORKER_METRICS_PORT,
    registry: running.deps.registry,
    extraMetrics: [
      async () => {
        const response = await fetch(`http://${sdkMetricsAddress}/metrics`);
        if (!response.ok) throw new Error(`SDK metrics exporter answered ${response.status}`);
        return response.text();
      },
    ],
    health: { live: () => workerLiveness(healthSources), ready: () => workerReadiness(healthSources) },
    onError: (what, error) => logger.warn({ err: error }, `metrics server: ${what} failed`),
  }).catch(async (error: unknown) => {
    await running.shutdown();
    throw error;
  });
  lifecycle.info(
    {
      kinds,
      temporal: config.TEMPORAL_ADDRESS,
      namespace: config.TEMPORAL_NAMESPACE,
      metrics: `${metrics.url}/metrics`,
      live: `${metrics.url}/livez`,
      ready: `${metrics.url}/readyz`,
      ...(running.deploymentVersion ? { deploymentName: running.deploymentVersion.deploymentName, buildId: running.deploymentVersion.buildId } : {}),
    },
    `workers running: ${kinds.join(', ')} (Temporal ${config.TEMPORAL_ADDRESS}, namespace ${config.TEMPORAL_NAMESPACE}, metrics ${metrics.url}/metrics)`,
  );
  const stop = (signal: NodeJS.Signals): void => {
    if (signalled) return;
    signalled = true;
    lifecycle.info({ signal }, 'workers stopping');
    void running.shutdown();
  };
  // `on`, not `once`: a terminal's Ctrl-C arrives more than once (directly, and relayed by npm and
  // tsx), and a second SIGINT with no listener left would kill the process mid-shutdown.
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  try {
    await running.done;
  } finally {
    await metrics.close();
  }
  if (!signalled) {
    // A worker whose polls give up (Temporal unreachable for minutes) stops without failing: exit
    // non-zero all the same, so a supervisor restarts the process instead of counting it done.
    lifecycle.error('workers stopped without SIGINT/SIGTERM (Temporal unreachable for long?); exiting with status 1');
    process.exitCode = 1;
  }
}
