/**
 * `/healthz` of a worker process: healthy while every worker is RUNNING. PostgreSQL and Redis are
 * probed and reported, but do not fail the check: the workers ride out their outages (activities
 * retry), and a supervisor restarting them would not bring a database back.
 */
import type { Worker } from '@temporalio/worker';
import type { HealthReport } from '../runtime/metricsServer.js';
import type { RuntimeDeps } from '../runtime/deps.js';

const PROBE_TIMEOUT_MS = 2000;

async function probe(fn: () => Promise<unknown>): Promise<{ ok: boolean; error?: string }> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      fn(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)), PROBE_TIMEOUT_MS);
      }),
    ]);
    return { ok: true };
  } catch (error) {
    return { ok: false, error: error instanceof Error ? error.message : String(error) };
  } finally {
    clearTimeout(timer);
  }
}

export async function workerHealth(workers: readonly Worker[], deps: Pick<RuntimeDeps, 'pool' | 'redis'>): Promise<HealthReport> {
  const states = workers.map((worker) => ({ taskQueue: worker.options.taskQueue, state: worker.getState() }));
  const [postgres, redis] = await Promise.all([probe(() => deps.pool.query('SELECT 1')), probe(() => deps.redis.ping())]);
  const ok = states.every((s) => s.state === 'RUNNING');
  return { ok, status: ok ? 'ok' : 'unavailable', workers: states, dependencies: { postgres, redis } };
}
