/**
 * The measuring window of an orchestration scenario: let the stack warm up, then take the
 * instruments' readings at the window's start and end (simulator counters, deferrals, CPU of each
 * process), so figures describe the steady state and not the start-up burst.
 */
import os from 'node:os';
import type { BenchStack } from './stack.js';
import { counterValues, simulatorCounts, type GroupCalls } from './measure.js';
import { cpuShares, cpuTimes, servicePidsFor, type CpuReading, type CpuTimes } from './processes.js';
import { sleep } from './stats.js';

const DEFERRALS = 'cardpoller_rate_limit_deferrals_total';
const LEASE_EXPIRIES = 'cardpoller_lease_expiries_total';

export interface Reading {
  readonly at: Date;
  readonly calls: GroupCalls;
  /** carrierId|type → deferrals so far. */
  readonly deferrals: Map<string, number>;
  /** carrierId → claims reclaimed after their lease expired, since the stack started. */
  readonly leaseExpiries: Map<string, number>;
  readonly cpu: CpuReading;
}

export interface WindowResult {
  readonly from: Date;
  readonly to: Date;
  readonly seconds: number;
  readonly start: Reading;
  readonly end: Reading;
  /** Share of one core per process during the window. */
  readonly cpu: CpuTimes;
}

export async function reading(stack: BenchStack): Promise<Reading> {
  const pids = { ...servicePidsFor(stack.config), simulator: [stack.simulator.pid] };
  return {
    at: new Date(),
    calls: simulatorCounts(await stack.simulator.stats({ cards: false })),
    deferrals: await counterValues(stack.deps.registry, DEFERRALS, ['carrier', 'type']),
    leaseExpiries: await counterValues(stack.deps.registry, LEASE_EXPIRIES, ['carrier']),
    cpu: cpuTimes(pids),
  };
}

/** Sleeps `warmupSec`, then measures for `durationSec`; `during` runs inside the window. */
export async function measureWindow(
  stack: BenchStack,
  seconds: { warmupSec: number; durationSec: number },
  log: (line: string) => void,
  during?: (until: number) => Promise<void>,
): Promise<WindowResult> {
  if (seconds.warmupSec > 0) log(`warm-up ${seconds.warmupSec} s`);
  await sleep(seconds.warmupSec * 1000);
  const start = await reading(stack);
  log(`measuring ${seconds.durationSec} s`);
  const until = Date.now() + seconds.durationSec * 1000;
  await Promise.all([sleep(seconds.durationSec * 1000), during?.(until)]);
  const end = await reading(stack);
  const ms = end.at.getTime() - start.at.getTime();
  return { from: start.at, to: end.at, seconds: ms / 1000, start, end, cpu: cpuShares(start.cpu, end.cpu, ms) };
}

/** Deferrals in the window per carrier and type. */
export function deferralsDuring(window: WindowResult, carrierId: string, type: string): number {
  const key = `${carrierId}|${type}`;
  return (window.end.deferrals.get(key) ?? 0) - (window.start.deferrals.get(key) ?? 0);
}

/** Expired leases since the stack started (all accounts), as of a reading. */
export function leaseExpiries(reading: Reading): number {
  return [...reading.leaseExpiries.values()].reduce((a, b) => a + b, 0);
}

/** One line on where CPU went, for the report's notes. */
export function cpuNote(cpu: CpuTimes): string {
  const cores = os.cpus().length;
  const total = cpu.temporal + cpu.redis + cpu.postgres + cpu.bench + cpu.simulator;
  const pct = (v: number): string => `${Math.round(v * 100)} %`;
  return (
    `CPU during the window (share of one core): Temporal server ${pct(cpu.temporal)}, this process (4 workers + bench) ${pct(cpu.bench)}, ` +
    `simulator ${pct(cpu.simulator)}, ` +
    `PostgreSQL ${pct(cpu.postgres)}, Redis ${pct(cpu.redis)} — ${pct(total)} of ${cores * 100} % available ` +
    `(a service's figure is all its work: anything else that used it in the window would count there too).`
  );
}
