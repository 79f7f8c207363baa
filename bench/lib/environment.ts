/**
 * What a run needs around it: the services (started when absent, like `npm run services:up`),
 * and the record that makes figures comparable across runs — machine, load, versions.
 */
import os from 'node:os';
import { existsSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Config } from '../../src/config/index.js';
import { servicesUp, temporalEndpoint } from '../../devstack/index.js';
import { TEMPORAL_BIN, startTemporal, stopTemporal } from '../../devstack/temporal.js';
import { dataDir } from '../../devstack/paths.js';
import { connectRedis } from '../../src/redis/connect.js';
import { logConnectionErrors } from '../../src/runtime/connectionErrors.js';

const execFileAsync = promisify(execFile);

export interface MachineSnapshot {
  readonly at: string;
  /** 1, 5 and 15 minute load averages: the machine is shared, so they qualify every figure. */
  readonly loadAverage: readonly number[];
  readonly freeMemoryMb: number;
  /** Size of the dev server's SQLite files (it slows as they grow); null when external. */
  readonly temporalDbMb: number | null;
}

export interface Machine {
  readonly cores: number;
  readonly cpuModel: string;
  readonly memoryMb: number;
  readonly platform: string;
}

export interface Versions {
  readonly node: string;
  readonly temporalCli: string;
  readonly redis: string;
  readonly postgres: string;
  /** Commit the code ran from ("+dirty": with uncommitted changes, e.g. other engineers' work). */
  readonly commit: string;
}

export function machine(): Machine {
  return {
    cores: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memoryMb: Math.round(os.totalmem() / 1024 / 1024),
    platform: `${os.type()} ${os.release()}`,
  };
}

function temporalDbMb(dataDirSetting: string): number | null {
  const db = join(dataDir(dataDirSetting), 'temporal', 'temporal.db');
  if (!existsSync(db)) return null;
  const size = [db, `${db}-wal`].filter((file) => existsSync(file)).reduce((n, file) => n + statSync(file).size, 0);
  return Math.round(size / 1024 / 1024);
}

export function snapshot(config: Config): MachineSnapshot {
  return {
    at: new Date().toISOString(),
    loadAverage: os.loadavg().map((l) => Math.round(l * 100) / 100),
    freeMemoryMb: Math.round(os.freemem() / 1024 / 1024),
    temporalDbMb: temporalDbMb(config.DATA_DIR),
  };
}

/** Starts (or reuses) Temporal, Redis and PostgreSQL exactly as `npm run services:up` does (AOF on). */
export async function ensureServices(config: Config, log: (line: string) => void): Promise<void> {
  await servicesUp(config, { redisPersistence: 'aof', log: (line) => log(`services: ${line}`) });
}

/**
 * Restarts the dev server on an empty database, so a scenario does not inherit the file the
 * previous one grew (the dev server slows as its SQLite file grows: README.md, 'Benchmarks'). Only
 * a server this project runs (TEMPORAL_ADDRESS not set in the environment); returns the size it had
 * in MB, or null when the server is external and was left alone.
 */
export async function freshTemporalDatabase(config: Config, log: (line: string) => void, env: NodeJS.ProcessEnv = process.env): Promise<number | null> {
  if ((env.TEMPORAL_ADDRESS ?? '') !== '') return null;
  const dir = join(dataDir(config.DATA_DIR), 'temporal');
  const before = temporalDbMb(config.DATA_DIR) ?? 0;
  await stopTemporal(dir);
  for (const suffix of ['', '-wal', '-shm']) rmSync(join(dir, `temporal.db${suffix}`), { force: true });
  await startTemporal(temporalEndpoint(config), dir, (line) => log(`services: ${line}`));
  return before;
}

export async function versions(config: Config): Promise<Versions> {
  const temporalCli = await execFileAsync(TEMPORAL_BIN, ['--version']).then(
    ({ stdout }) => stdout.trim(),
    () => 'unknown (external server)',
  );
  const redis = await connectRedis(config.REDIS_URL, { connectionName: 'bench-versions' });
  const redisVersion = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1] ?? 'unknown';
  await redis.quit();
  const client = new pg.Client({ connectionString: config.DATABASE_URL });
  // Unhandled, a lost connection's 'error' event would end the bench run instead of failing the query.
  logConnectionErrors(client, 'postgres(bench-versions)');
  await client.connect();
  const { rows } = await client.query<{ server_version: string }>('SHOW server_version');
  await client.end();
  const commit = await execFileAsync('git', ['describe', '--always', '--dirty=+dirty']).then(
    ({ stdout }) => stdout.trim(),
    () => 'unknown',
  );
  return { node: process.version, temporalCli, redis: redisVersion, postgres: rows[0]?.server_version ?? 'unknown', commit };
}
