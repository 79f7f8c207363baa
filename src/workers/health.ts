/**
 * The health contract (src/runtime/health.ts) of a worker process, served by its metrics server:
 *
 * - live: every worker is starting or running, or the process is stopping on a signal. A worker
 *   that failed, or stopped on its own while the others go on, makes it 503: a restart helps.
 * - ready: every worker RUNNING, and PostgreSQL, Redis and Temporal answer. The workers ride out
 *   a dependency's outage (activities retry), so an outage makes the process unready, never dead.
 */
import type { Worker } from '@temporalio/worker';
import { dependencyProbes, probeDependencies, type HealthReport, type TemporalService } from '../runtime/health.js';
import type { RuntimeDeps } from '../runtime/deps.js';

export interface WorkerHealthSources {
  readonly workers: readonly Pick<Worker, 'getState' | 'options'>[];
  readonly deps: Pick<RuntimeDeps, 'pool' | 'redis'>;
  /** The workers' connection to Temporal. */
  readonly temporal: TemporalService;
  /** True once SIGINT/SIGTERM asked the workers to stop (their states then leave RUNNING on purpose). */
  readonly stopping: () => boolean;
}

/** States of a worker that has not ended: it polls, or is about to. */
const ALIVE = new Set(['INITIALIZED', 'RUNNING']);

const workerStates = (sources: WorkerHealthSources): { taskQueue: string; state: string }[] =>
  sources.workers.map((worker) => ({ taskQueue: worker.options.taskQueue, state: worker.getState() }));

export function workerLiveness(sources: WorkerHealthSources): HealthReport {
  const workers = workerStates(sources);
  const alive = sources.stopping() || workers.every((worker) => ALIVE.has(worker.state));
  return alive ? { status: 'ok', workers } : { status: 'unavailable', failed: ['workers'], workers };
}

export async function workerReadiness(sources: WorkerHealthSources): Promise<HealthReport> {
  const workers = workerStates(sources);
  const running = !sources.stopping() && workers.every((worker) => worker.state === 'RUNNING');
  const report = await probeDependencies(dependencyProbes(sources.deps, sources.temporal), running ? [] : ['workers']);
  return { ...report, workers };
}
