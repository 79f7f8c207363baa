/**
 * CPU time of the service processes (Temporal dev server, redis-server, PostgreSQL and all its
 * backends) from /proc, so a scenario can say which process the time went to. The machine is
 * shared: these processes also serve other users' work during the window, which the report notes.
 */
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { dataDir } from '../../src/services/paths.js';

/** Kernel clock ticks per second (USER_HZ); 100 on every Linux build we run on. */
const CLOCK_TICKS = 100;

export interface ServicePids {
  readonly temporal: number[];
  readonly redis: number[];
  readonly postgres: number[];
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
  return readdirSync('/proc').filter((entry) => /^\d+$/.test(entry)).map(Number);
}

export type CpuTimes = Record<'temporal' | 'redis' | 'postgres' | 'bench', number>;

/** CPU readings plus postgres per pid: backends come and go, only pids alive at both ends compare. */
export interface CpuReading {
  readonly totals: CpuTimes;
  readonly postgresByPid: ReadonlyMap<number, number>;
}

/**
 * CPU milliseconds used so far by each service (postgres: the postmaster and its current
 * backends; a backend that exits during the window takes its time with it, so postgres is a
 * lower bound) and by this process (workers, simulator and bench share it).
 */
export function cpuTimes(pids: ServicePids): CpuReading {
  const sum = (list: readonly number[]): number => list.reduce((total, pid) => total + (readStat(pid)?.cpuMs ?? 0), 0);
  const postgresByPid = new Map<number, number>();
  for (const pid of pids.postgres.flatMap((p) => [p, ...childrenOf(p)])) {
    const stat = readStat(pid);
    if (stat) postgresByPid.set(pid, stat.cpuMs);
  }
  const own = process.cpuUsage();
  return {
    totals: { temporal: sum(pids.temporal), redis: sum(pids.redis), postgres: [...postgresByPid.values()].reduce((a, b) => a + b, 0), bench: (own.user + own.system) / 1000 },
    postgresByPid,
  };
}

/** CPU share of one core per process over a window (1.0 = one core fully busy). */
export function cpuShares(before: CpuReading, after: CpuReading, windowMs: number): CpuTimes {
  const share = (ms: number): number => Math.round((ms / windowMs) * 100) / 100;
  let postgresMs = 0;
  // A backend that exited took its time with it, one that started had none before: the pids
  // present at both ends give a lower bound that is never negative.
  for (const [pid, end] of after.postgresByPid) {
    const start = before.postgresByPid.get(pid);
    if (start !== undefined) postgresMs += end - start;
  }
  return {
    temporal: share(after.totals.temporal - before.totals.temporal),
    redis: share(after.totals.redis - before.totals.redis),
    postgres: share(postgresMs),
    bench: share(after.totals.bench - before.totals.bench),
  };
}
