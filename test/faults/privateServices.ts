/**
 * A PostgreSQL and a Redis of one test's own, on their own ports and data folders under
 * `.data/faults/`, started the way `npm run services:up` starts the shared ones. Fault tests stop
 * and start these under a running system; the shared services other test files use are never
 * touched.
 */
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { loadConfig } from '../../src/config/index.js';
import { dataDir } from '../../devstack/paths.js';
import { isAlive, isTcpOpen, readPid, waitUntil } from '../../devstack/process.js';
import { startTemporal, stopTemporal } from '../../devstack/temporal.js';
import { startPostgres, stopPostgres, type PostgresOptions } from '../../devstack/postgres.js';
import { startRedis, stopRedis } from '../../devstack/redis.js';

export interface PrivateService {
  readonly url: string;
  start(): Promise<void>;
  /** PostgreSQL: `pg_ctl stop -m fast`; Redis: SIGTERM (the AOF is flushed, data survives). */
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';

function faultsDir(name: string): string {
  return join(dataDir(loadConfig().DATA_DIR), 'faults', name);
}

/** Refuses a port something else listens on: stopping "our" service there would stop theirs. */
async function claimPort(port: number, stopLeftover: () => Promise<boolean>): Promise<void> {
  if (!(await isTcpOpen(HOST, port))) return;
  // A run that died before its cleanup may have left our own service running: stop it.
  await stopLeftover();
  if (await isTcpOpen(HOST, port)) throw new Error(`port ${port} is in use by a service this test did not start`);
}

/** `name` names its data folder: tests that may run at the same time use different ones. */
export async function privatePostgres(port: number, log: (line: string) => void, name = 'postgres'): Promise<PrivateService> {
  const dir = faultsDir(name);
  const options: PostgresOptions = { host: HOST, port, user: 'postgres', password: 'postgres', database: 'cardpoller' };
  await claimPort(port, () => stopPostgres(dir));
  const service: PrivateService = {
    url: `postgres://postgres:postgres@${HOST}:${port}/cardpoller`,
    // The cluster folder is kept between runs: initdb (first run only) takes seconds.
    start: async () => void (await startPostgres(options, dir, log)),
    stop: async () => void (await stopPostgres(dir)),
  };
  await service.start();
  return service;
}

export async function privateRedis(port: number, log: (line: string) => void, name = 'redis'): Promise<PrivateService> {
  const dir = faultsDir(name);
  await claimPort(port, () => stopRedis(dir));
  // Fresh data each run; within the run the AOF keeps the data across stop/start.
  rmSync(dir, { recursive: true, force: true });
  const service: PrivateService = {
    url: `redis://${HOST}:${port}`,
    start: async () => void (await startRedis({ host: HOST, port, persistence: 'aof' }, dir, log)),
    stop: async () => void (await stopRedis(dir)),
  };
  await service.start();
  return service;
}

/**
 * A Temporal dev server of the fault suite's own (never the shared one on 7233), on a db file under
 * `.data/faults/temporal/`, so it can be killed -9 and started again on the same history.
 */
export interface PrivateTemporal extends PrivateService {
  /** SIGKILL: no shutdown at all, as a crashed host would. */
  kill(): Promise<void>;
}

export async function privateTemporal(port: number, uiPort: number, log: (line: string) => void): Promise<PrivateTemporal> {
  const dir = faultsDir('temporal');
  const endpoint = { host: HOST, port, uiPort };
  await claimPort(port, () => stopTemporal(dir));
  // Fresh history each run; within the run the db file keeps it across kill/start.
  rmSync(dir, { recursive: true, force: true });
  const pidFile = join(dir, 'server.pid');
  const service: PrivateTemporal = {
    url: `${HOST}:${port}`,
    start: async () => void (await startTemporal(endpoint, dir, log)),
    stop: async () => void (await stopTemporal(dir)),
    kill: async () => {
      const pid = readPid(pidFile);
      if (pid === undefined || !isAlive(pid)) return;
      process.kill(pid, 'SIGKILL');
      await waitUntil('the killed Temporal server to exit', async () => !isAlive(pid) && !(await isTcpOpen(HOST, port)), 10_000);
    },
  };
  await service.start();
  return service;
}
