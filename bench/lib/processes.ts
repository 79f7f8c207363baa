/**
 * CPU time of the service processes (Temporal dev server — or the four processes of the local
 * Temporal cluster when a stack points at it —, redis-server, PostgreSQL and all its backends)
 * from /proc, so a scenario can say which process the time went to. A service's CPU is all of its
 * work: whatever else used it in the window counts there too, which the report notes (it used to
 * say, unconditionally, that the services had served other users' tests).
 */
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../../src/config/index.js';
import { dataDir } from '../../devstack/paths.js';
import { CLUSTER_SERVICES, clusterOptions, frontendAddress, servicePid } from '../../devstack/temporalCluster.js';

/** Kernel clock ticks per second (USER_HZ); 100 on every Linux build we run on. */
const CLOCK_TICKS = 100;

export interface ServicePids {
  readonly temporal: number[];
  readonly redis: number[];
  readonly postgres: number[];
  /** The stack's gateway simulator, a process of its own (src/simulator/childProcess.ts), when it runs one. */
  readonly simulator?: readonly number[];
}

function readPidFile(path: string): number | undefined {
  if (!existsSync(path)) return undefined;
  const pid = Number(readFileSync(path, 'utf8').split('\n')[0]?.trim());
  return Number.isInteger(pid) && pid > 0 && existsSync(`/proc/${pid}`) ? pid : undefined;
}

/** Children of `parent` (postgres backends are forked from the postmaster). */
function childrenOf(parent: number): number[] {
  const children: number[] = [];
  for (const pid of listPids()) if (readStat(pid)?.ppid === parent) children.push(pid);
  return children;
}

/** Process ids by name, for services we did not start (no pid file). */
function pidsNamed(pattern: RegExp): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (pattern.test(cmdline)) found.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

/** The running processes of the local Temporal cluster (frontend, history, matching, worker), from their pid files. */
export function temporalClusterPids(config: Config): number[] {
  const options = clusterOptions(config);
  return CLUSTER_SERVICES.map((service) => servicePid(options, service)).filter((pid): pid is number => pid !== undefined);
}

/** Does this configuration talk to the local Temporal cluster rather than the dev server? */
export function usesTemporalCluster(config: Config): boolean {
  const address = config.TEMPORAL_ADDRESS.replace(/^localhost:/, '127.0.0.1:');
  return address === frontendAddress(clusterOptions(config));
}

/**
 * Service pids for a stack's configuration: "Temporal" is the server it talks to, so a run against
 * the local cluster counts the cluster's four processes, not the idle dev server.
 */
export function servicePidsFor(config: Config): ServicePids {
  const pids = servicePids(config.DATA_DIR);
  return usesTemporalCluster(config) ? { ...pids, temporal: temporalClusterPids(config) } : pids;
}

export function servicePids(dataDirSetting: string): ServicePids {
  const root = dataDir(dataDirSetting);
  const temporal = readPidFile(join(root, 'temporal', 'server.pid'));
  const redis = readPidFile(join(root, 'redis', 'redis.pid'));
  const postmaster = readPidFile(join(root, 'postgres', 'cluster', 'postmaster.pid'));
  return {
    temporal: temporal !== undefined ? [temporal] : pidsNamed(/temporal server start-dev/),
    redis: redis !== undefined ? [redis] : pidsNamed(/^\S*redis-server /),
    postgres: postmaster !== undefined ? [postmaster] : pidsNamed(/bin\/postgres -D/),
  };
}

export interface ProcStat {
  readonly comm: string;
  readonly ppid: number;
  /** user + system time of the process itself (all its threads). */
  readonly cpuMs: number;
  /** user + system time of its children that ended and were waited for. */
  readonly childrenCpuMs: number;
}

export function readStat(pid: number): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may contain spaces: fields are counted after its closing parenthesis.
    const comm = text.slice(text.indexOf('(') + 1, text.lastIndexOf(')'));
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    const ppid = Number(fields[1]);
    const ticks = Number(fields[11]) + Number(fields[12]);
    const childTicks = Number(fields[13]) + Number(fields[14]);
    return { comm, ppid, cpuMs: (ticks * 1000) / CLOCK_TICKS, childrenCpuMs: (childTicks * 1000) / CLOCK_TICKS };
  } catch {
    return undefined;
  }
}

/** Every process id in /proc right now. */
export function listPids(): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number);
}

/**
 * temporalStore: the PostgreSQL backends connected to Temporal's own databases (the cluster's
 * persistence; a part of `postgres`, 0 for the dev server, which keeps SQLite in its process).
 */
export type CpuTimes = Record<'temporal' | 'redis' | 'postgres' | 'bench' | 'simulator' | 'temporalStore', number>;

/** Databases of the Temporal cluster's persistence and visibility (devstack/temporalCluster.ts). */
const TEMPORAL_DATABASES: ReadonlySet<string> = new Set(['temporal', 'temporal_visibility']);

/**
 * CPU readings plus per pid for the processes that come and go (postgres backends; Temporal
 * cluster services a test restarts): only pids alive at both ends compare.
 */
export interface CpuReading {
  readonly totals: CpuTimes;
  readonly postgresByPid: ReadonlyMap<number, number>;
  readonly temporalByPid: ReadonlyMap<number, number>;
  /** Backends whose process title names a Temporal database. */
  readonly temporalStorePids: ReadonlySet<number>;
}

/** The database a backend serves, from its title ("postgres: user database host state"). */
function backendDatabase(pid: number): string | undefined {
  try {
    const title = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
    return /^postgres: \S+ (\S+) /.exec(title)?.[1];
  } catch {
    return undefined;
  }
}

/**
 * CPU milliseconds used so far by each service (postgres: the postmaster and its current
 * backends; a backend that exits during the window takes its time with it, so postgres is a
 * lower bound), by this process (workers and bench share it) and by the stack's simulator.
 */
export function cpuTimes(pids: ServicePids): CpuReading {
  const sum = (list: readonly number[]): number => list.reduce((total, pid) => total + (readStat(pid)?.cpuMs ?? 0), 0);
  const byPid = (list: readonly number[]): Map<number, number> => {
    const found = new Map<number, number>();
    for (const pid of list) {
      const stat = readStat(pid);
      if (stat) found.set(pid, stat.cpuMs);
    }
    return found;
  };
  const postgresByPid = byPid(pids.postgres.flatMap((p) => [p, ...childrenOf(p)]));
  const temporalByPid = byPid(pids.temporal);
  const temporalStorePids = new Set([...postgresByPid.keys()].filter((pid) => TEMPORAL_DATABASES.has(backendDatabase(pid) ?? '')));
  const total = (values: Iterable<number>): number => [...values].reduce((a, b) => a + b, 0);
  const own = process.cpuUsage();
  return {
    totals: {
      temporal: total(temporalByPid.values()),
      redis: sum(pids.redis),
      postgres: total(postgresByPid.values()),
      bench: (own.user + own.system) / 1000,
      simulator: sum(pids.simulator ?? []),
      temporalStore: total([...temporalStorePids].map((pid) => postgresByPid.get(pid) ?? 0)),
    },
    postgresByPid,
    temporalByPid,
    temporalStorePids,
  };
}

/** Time of the pids present at both readings (a process that came or went in between is left out). */
function sharedDelta(before: ReadonlyMap<number, number>, after: ReadonlyMap<number, number>, only?: ReadonlySet<number>): number {
  let ms = 0;
  for (const [pid, end] of after) {
    const start = before.get(pid);
    if (start !== undefined && (only === undefined || only.has(pid))) ms += end - start;
  }
  return ms;
}

/** CPU share of one core per process over a window (1.0 = one core fully busy). */
export function cpuShares(before: CpuReading, after: CpuReading, windowMs: number): CpuTimes {
  const share = (ms: number): number => Math.round((ms / windowMs) * 100) / 100;
  // A backend that exited took its time with it, one that started had none before: the pids
  // present at both ends give a lower bound that is never negative. Same for a Temporal cluster
  // service restarted during the window.
  return {
    temporal: share(sharedDelta(before.temporalByPid, after.temporalByPid)),
    redis: share(after.totals.redis - before.totals.redis),
    postgres: share(sharedDelta(before.postgresByPid, after.postgresByPid)),
    bench: share(after.totals.bench - before.totals.bench),
    simulator: share(after.totals.simulator - before.totals.simulator),
    temporalStore: share(sharedDelta(before.postgresByPid, after.postgresByPid, after.temporalStorePids)),
  };
}
