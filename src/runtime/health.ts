/**
 * The health contract every process serves (the API on its port, a worker process on its metrics
 * server), docs/design.md "13. Operating it":
 *
 * - `/livez`: the process is alive. 503 only when restarting it would help (a worker process whose
 *   worker failed or stopped on its own); a dependency outage never fails it, as restarting the
 *   process would not bring PostgreSQL, Redis or Temporal back.
 * - `/readyz`: the process can do its work: every dependency it uses answers (and a worker
 *   process' workers run). 503 otherwise, the body naming what failed in `failed`.
 * - `/healthz`: an alias of `/readyz`, kept for probes written before the split.
 */
import type { RuntimeDeps } from './deps.js';

/** The path each probe answers on, and what it reports. */
export const HEALTH_PATHS = { '/livez': 'live', '/readyz': 'ready', '/healthz': 'ready' } as const;

export type HealthPath = keyof typeof HEALTH_PATHS;
export type HealthKind = (typeof HEALTH_PATHS)[HealthPath];

export function isHealthPath(path: string): path is HealthPath {
  return Object.hasOwn(HEALTH_PATHS, path);
}

/** A dependency that does not answer within this is reported down (probes must stay fast). */
export const HEALTH_TIMEOUT_MS = 2000;

export interface HealthCheck {
  readonly ok: boolean;
  readonly ms: number;
  readonly error?: string;
}

/** One answer of `/livez` or `/readyz`: 200 when `status` is `ok`, 503 with `failed` otherwise. */
export interface HealthReport {
  readonly status: 'ok' | 'unavailable';
  /** What is not as it should be: dependency names (`postgres`, `redis`, `temporal`) or `workers`. */
  readonly failed?: readonly string[];
  /** Each dependency's probe (readiness only). */
  readonly checks?: Readonly<Record<string, HealthCheck>>;
  /** A worker process' workers and their SDK states. */
  readonly workers?: readonly { readonly taskQueue: string; readonly state: string }[];
}

export const healthStatusCode = (report: HealthReport): 200 | 503 => (report.status === 'ok' ? 200 : 503);

/** Runs `fn`; down when it throws or does not answer within {@link HEALTH_TIMEOUT_MS}. */
export async function probe(fn: () => Promise<unknown>): Promise<HealthCheck> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${HEALTH_TIMEOUT_MS} ms`)), HEALTH_TIMEOUT_MS);
    });
    await Promise.race([fn(), timeout]);
    return { ok: true, ms: Date.now() - started };
  } catch (error) {
    return { ok: false, ms: Date.now() - started, error: error instanceof Error ? error.message : String(error) };
  } finally {
    clearTimeout(timer);
  }
}

/** A readiness answer with one probe per dependency. */
export interface ReadinessReport<Name extends string> extends HealthReport {
  readonly checks: Readonly<Record<Name, HealthCheck>>;
}

/** Probes every dependency at once; `failed` names the ones down, then `extraFailed`. */
export async function probeDependencies<Name extends string>(
  dependencies: Readonly<Record<Name, () => Promise<unknown>>>,
  extraFailed: readonly string[] = [],
): Promise<ReadinessReport<Name>> {
  const entries = Object.entries(dependencies) as [Name, () => Promise<unknown>][];
  const results = await Promise.all(entries.map(async ([name, fn]) => [name, await probe(fn)] as const));
  const checks = Object.fromEntries(results) as Record<Name, HealthCheck>;
  const failed = [...results.filter(([, check]) => !check.ok).map(([name]) => name), ...extraFailed];
  return failed.length === 0 ? { status: 'ok', checks } : { status: 'unavailable', failed, checks };
}

/** What the Temporal probe calls: a client's or a worker's connection. */
export interface TemporalService {
  readonly workflowService: { getSystemInfo(request: object): Promise<unknown> };
}

/** The dependencies of every process, as it uses them: a query, a PING, the Temporal frontend's system info. */
export function dependencyProbes(
  deps: Pick<RuntimeDeps, 'pool' | 'redis'>,
  temporal: TemporalService,
): Record<'postgres' | 'redis' | 'temporal', () => Promise<unknown>> {
  return {
    postgres: () => deps.pool.query('SELECT 1'),
    redis: () => deps.redis.ping(),
    temporal: () => temporal.workflowService.getSystemInfo({}),
  };
}
