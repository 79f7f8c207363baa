/**
 * Brings up (or reuses) the services the project needs on loopback: Temporal dev server with its
 * Web UI, Redis, PostgreSQL. A service whose URL is set in the environment is external: nothing
 * is started for it and the URL is used as it is.
 */
import { join } from 'node:path';
import type { Config } from '../src/config/index.js';
import { dataDir } from './paths.js';
import { parseHostPort, startTemporal, stopTemporal, type TemporalEndpoint } from './temporal.js';
import { startRedis, stopRedis } from './redis.js';
import { parseDatabaseUrl, startPostgres, stopPostgres } from './postgres.js';

export interface ServiceAddresses {
  readonly temporal: string;
  readonly temporalUi: string;
  readonly redis: string;
  readonly postgres: string;
}

export interface ServicesUpOptions {
  /** Redis persistence: AOF for development, none for throw-away test data. */
  readonly redisPersistence: 'aof' | 'none';
  readonly log: (line: string) => void;
  readonly env?: NodeJS.ProcessEnv;
}

function isExternal(env: NodeJS.ProcessEnv, variable: string): boolean {
  return (env[variable] ?? '') !== '';
}

/** Where the project's own Temporal dev server listens (gRPC and Web UI), from the configuration. */
export function temporalEndpoint(config: Pick<Config, 'TEMPORAL_ADDRESS' | 'TEMPORAL_UI_URL' | 'TEMPORAL_DEV_METRICS_PORT'>): TemporalEndpoint {
  return {
    ...parseHostPort(config.TEMPORAL_ADDRESS),
    uiPort: Number(new URL(config.TEMPORAL_UI_URL).port || '80'),
    metricsPort: config.TEMPORAL_DEV_METRICS_PORT,
  };
}

export async function servicesUp(config: Config, options: ServicesUpOptions): Promise<ServiceAddresses> {
  const env = options.env ?? process.env;
  const root = dataDir(config.DATA_DIR);
  const { log } = options;
  const tasks: Promise<void>[] = [];
  if (!isExternal(env, 'TEMPORAL_ADDRESS')) {
    tasks.push(startTemporal(temporalEndpoint(config), join(root, 'temporal'), log).then((how) => log(`temporal: ${how}`)));
  }
  if (!isExternal(env, 'REDIS_URL')) {
    const url = new URL(config.REDIS_URL);
    tasks.push(
      startRedis({ host: url.hostname, port: Number(url.port || '6379'), persistence: options.redisPersistence }, join(root, 'redis'), log).then((how) =>
        log(`redis: ${how}`),
      ),
    );
  }
  if (!isExternal(env, 'DATABASE_URL')) {
    tasks.push(startPostgres(parseDatabaseUrl(config.DATABASE_URL), join(root, 'postgres'), log).then((how) => log(`postgres: ${how}`)));
  }
  // Start in parallel: Temporal's first start dominates and the others need not wait for it.
  const results = await Promise.allSettled(tasks);
  const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failures.length > 0)
    throw new AggregateError(
      failures.map((f) => f.reason as Error),
      'Some services failed to start',
    );
  return {
    temporal: config.TEMPORAL_ADDRESS,
    temporalUi: config.TEMPORAL_UI_URL,
    redis: config.REDIS_URL,
    postgres: config.DATABASE_URL.replace(/:\/\/([^:@/]+):[^@/]+@/, '://$1:***@'),
  };
}

export async function servicesDown(config: Config, log: (line: string) => void): Promise<void> {
  const root = dataDir(config.DATA_DIR);
  log(`temporal: ${(await stopTemporal(join(root, 'temporal'))) ? 'stopped' : 'not running (or not ours)'}`);
  log(`redis: ${(await stopRedis(join(root, 'redis'))) ? 'stopped' : 'not running (or not ours)'}`);
  log(`postgres: ${(await stopPostgres(join(root, 'postgres'))) ? 'stopped' : 'not running (or not ours)'}`);
}
