/**
 * Runs the workers of the given kinds in this process until SIGINT/SIGTERM, then shuts down
 * gracefully: pollers stop, in-flight activities get the configured grace time to finish.
 */
import { NativeConnection, Runtime, DefaultLogger, type Worker } from '@temporalio/worker';
import type { Config } from '../config/index.js';
import { createRuntimeDeps, type RuntimeDeps } from '../runtime/deps.js';
import { createPollingServices } from '../polling/services.js';
import { bundleWorkflows, createWorker, type WorkerKind } from './createWorker.js';
import { keepPollingControlRunning } from './keepPollingControl.js';
import { taskQueues } from '../config/index.js';

export interface RunningWorkerSet {
  readonly workers: readonly Worker[];
  readonly deps: RuntimeDeps;
  /** Resolves when every worker has stopped. */
  readonly done: Promise<void>;
  shutdown(): Promise<void>;
}

const TEMPORAL_LOG_LEVELS = { fatal: 'ERROR', error: 'ERROR', warn: 'WARN', info: 'INFO', debug: 'DEBUG', trace: 'TRACE', silent: 'ERROR' } as const;

let runtimeInstalled = false;

export async function startWorkers(config: Config, kinds: readonly WorkerKind[]): Promise<RunningWorkerSet> {
  if (!runtimeInstalled) {
    runtimeInstalled = true;
    Runtime.install({ logger: new DefaultLogger(TEMPORAL_LOG_LEVELS[config.LOG_LEVEL]) });
  }
  const deps = await createRuntimeDeps(config, { name: `workers-${kinds.join('-')}` });
  const services = createPollingServices({ deps });
  const connection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS });
  const needsBundle = kinds.includes('control') || kinds.includes('card');
  const workflowBundle = needsBundle ? await bundleWorkflows() : { code: '', sourceMap: '' };
  const workers = await Promise.all(kinds.map((kind) => createWorker({ kind, config, connection, deps, services, workflowBundle })));
  // Whoever runs the control worker keeps pollingControl (and through it the schedulers) running.
  const keeper = kinds.includes('control')
    ? keepPollingControlRunning({
        connection,
        namespace: config.TEMPORAL_NAMESPACE,
        taskQueues: taskQueues(config),
        workflowIdPrefix: config.WORKFLOW_ID_PREFIX,
        log: (line) => void process.stderr.write(`[control] ${line}\n`),
      })
    : undefined;
  const done = Promise.allSettled(workers.map((worker) => worker.run())).then(async (results) => {
    keeper?.stop();
    await connection.close();
    await deps.close();
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  });
  let stopping: Promise<void> | undefined;
  return {
    workers,
    deps,
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
 * Entry-point helper: start, stop on the first SIGINT/SIGTERM, exit non-zero if a worker failed
 * or stopped on its own.
 *
 * PostgreSQL and Redis outages do not stop the workers (their connections log and recover; the
 * activities that meet the outage fail and are retried by Temporal), so this waits through them.
 */
export async function runWorkersUntilSignal(config: Config, kinds: readonly WorkerKind[]): Promise<void> {
  const running = await startWorkers(config, kinds);
  process.stdout.write(`workers running: ${kinds.join(', ')} (Temporal ${config.TEMPORAL_ADDRESS}, namespace ${config.TEMPORAL_NAMESPACE})\n`);
  let signalled = false;
  const stop = (): void => {
    signalled = true;
    void running.shutdown();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await running.done;
  if (!signalled) {
    // A worker whose polls give up (Temporal unreachable for minutes) stops without failing: exit
    // non-zero all the same, so a supervisor restarts the process instead of counting it done.
    process.stderr.write('workers stopped without SIGINT/SIGTERM (Temporal unreachable for long?); exiting with status 1\n');
    process.exitCode = 1;
  }
}
