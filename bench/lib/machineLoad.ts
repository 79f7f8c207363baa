/**
 * Is the machine quiet enough for figures to mean anything? Machine-wide CPU from /proc/stat minus
 * the CPU of our processes (this one and its children; during the run also the service processes
 * it drives) = what other work took. Sampled for a few seconds before the run (the gate) and every
 * few seconds during it (recorded per scenario).
 */
import os from 'node:os';
import { readFileSync } from 'node:fs';
import { listPids, readStat, servicePids, type ProcStat } from './processes.js';
import { round, sleep } from './stats.js';

/** Kernel clock ticks per second (USER_HZ), as in processes.ts. */
const CLOCK_TICKS = 100;
/** Gate before the run: 1-minute load average per core, and other processes' CPU in cores. */
export const LOAD_PER_CORE_LIMIT = 0.25;
export const OTHERS_BEFORE_LIMIT_CORES = 0.1;
/** During a scenario: other processes' mean CPU in cores. */
export const OTHERS_DURING_LIMIT_CORES = 0.25;
const BEFORE_SAMPLE_MS = 3000;
const MONITOR_EVERY_MS = 5000;
const TOP = 5;

interface Snapshot {
  readonly at: number;
  /** Machine-wide busy ms (user, nice, system, irq, softirq over all cores) and stolen ms. */
  readonly busyMs: number;
  readonly stealMs: number;
  readonly procs: ReadonlyMap<number, ProcStat>;
}

export interface ProcessShare {
  readonly pid: number;
  readonly name: string;
  /** Cores used on average over the sample (1 = one core busy). */
  readonly cores: number;
}

export interface LoadSample {
  readonly seconds: number;
  readonly loadAverage1m: number;
  readonly machineCores: number;
  readonly oursCores: number;
  readonly othersCores: number;
  /** CPU the hypervisor gave to other guests: also a sign of a busy host. */
  readonly stealCores: number;
  /** The busiest processes that are not ours. */
  readonly topOthers: readonly ProcessShare[];
}

function readMachine(): { busyMs: number; stealMs: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  const ticks = (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0);
  return { busyMs: (ticks * 1000) / CLOCK_TICKS, stealMs: ((steal ?? 0) * 1000) / CLOCK_TICKS };
}

function snapshot(): Snapshot {
  const procs = new Map<number, ProcStat>();
  for (const pid of listPids()) {
    const stat = readStat(pid);
    if (stat) procs.set(pid, stat);
  }
  return { at: Date.now(), ...readMachine(), procs };
}

/** `roots` and every process below them in either snapshot. */
function descendants(roots: readonly number[], ...snaps: readonly Snapshot[]): Set<number> {
  const found = new Set(roots);
  for (const snap of snaps) {
    let grew = true;
    while (grew) {
      grew = false;
      for (const [pid, stat] of snap.procs) {
        if (!found.has(pid) && found.has(stat.ppid)) {
          found.add(pid);
          grew = true;
        }
      }
    }
  }
  return found;
}

function compare(before: Snapshot, after: Snapshot, roots: readonly number[]): LoadSample {
  const seconds = (after.at - before.at) / 1000;
  const ours = descendants(roots, before, after);
  let oursMs = 0;
  const others: ProcessShare[] = [];
  for (const [pid, end] of after.procs) {
    const start = before.procs.get(pid);
    if (ours.has(pid)) {
      // With reaped children: short-lived helpers (git, psql backends) land in their parent's count.
      oursMs += start ? end.cpuMs + end.childrenCpuMs - start.cpuMs - start.childrenCpuMs : end.cpuMs;
      continue;
    }
    const ms = start ? end.cpuMs - start.cpuMs : end.cpuMs;
    if (ms > 0) others.push({ pid, name: end.comm, cores: round(ms / 1000 / seconds, 3) });
  }
  const machineMs = after.busyMs - before.busyMs;
  const cores = (ms: number): number => round(Math.max(0, ms) / 1000 / seconds, 3);
  return {
    seconds: round(seconds, 1),
    loadAverage1m: round(os.loadavg()[0] ?? 0),
    machineCores: cores(machineMs),
    oursCores: cores(oursMs),
    // Machine-wide minus ours, not the sum of other pids: processes that came and went count too.
    othersCores: cores(machineMs - oursMs),
    stealCores: cores(after.stealMs - before.stealMs),
    topOthers: others.sort((a, b) => b.cores - a.cores).slice(0, TOP),
  };
}

export interface GateResult {
  readonly sample: LoadSample;
  readonly limits: { readonly loadAverage1m: number; readonly othersCores: number };
  /** Empty when the machine was quiet. */
  readonly reasons: readonly string[];
}

function describeOthers(sample: LoadSample): string {
  const top = sample.topOthers.filter((p) => p.cores >= 0.01).map((p) => `${p.name} (pid ${p.pid}) ${p.cores}`);
  return top.length > 0 ? `; busiest: ${top.join(', ')}` : '';
}

/**
 * Samples for ~3 s before anything starts. Only this process counts as ours: the services are
 * shared, and any CPU they use now is someone else's work.
 */
export async function checkBeforeRun(): Promise<GateResult> {
  const before = snapshot();
  await sleep(BEFORE_SAMPLE_MS);
  const sample = compare(before, snapshot(), [process.pid]);
  const cores = os.cpus().length;
  const limits = { loadAverage1m: round(LOAD_PER_CORE_LIMIT * cores), othersCores: OTHERS_BEFORE_LIMIT_CORES };
  const reasons: string[] = [];
  if (sample.loadAverage1m > limits.loadAverage1m) {
    reasons.push(`1-minute load average ${sample.loadAverage1m} > ${limits.loadAverage1m} (${LOAD_PER_CORE_LIMIT} per core × ${cores} cores) before the run`);
  }
  if (sample.othersCores > limits.othersCores) {
    reasons.push(
      `other processes used ${sample.othersCores} cores over ${sample.seconds} s before the run (limit ${limits.othersCores})${describeOthers(sample)}`,
    );
  }
  return { sample, limits, reasons };
}

export interface DuringSummary {
  readonly samples: number;
  readonly othersMeanCores: number;
  readonly othersMaxCores: number;
  readonly oursMeanCores: number;
  readonly stealMeanCores: number;
  readonly loadAverage1mMax: number;
  readonly limitOthersMeanCores: number;
  /** Other processes by name, mean cores over the samples. */
  readonly busiestOthers: readonly { readonly name: string; readonly cores: number }[];
}

export interface LoadMonitor {
  /** Figures of the samples taken between two instants (ms). */
  summary(from: number, to: number): DuringSummary;
  stop(): void;
}

/** Processes a scenario drives besides the usual services (the Temporal cluster, Redis Cluster nodes). */
const driven = new Set<() => readonly number[]>();

/**
 * Counts the processes `pids` returns (asked at every sample: a restarted process has a new pid)
 * as ours in every load monitor until the returned function is called. For services only some
 * scenarios use: counted always, their other users' load would hide from the other scenarios.
 */
export function driveProcesses(pids: () => readonly number[]): () => void {
  driven.add(pids);
  return () => void driven.delete(pids);
}

/**
 * Samples every 5 s until stopped. Ours = this process, its children and the service processes
 * (Temporal, Redis, PostgreSQL and its backends, and those a scenario declared with
 * driveProcesses): the run drives them. Other users of the same
 * services therefore count as ours here; the gate before the run is what catches them.
 */
export function startLoadMonitor(dataDir: string): LoadMonitor {
  const samples: { at: number; sample: LoadSample }[] = [];
  let last = snapshot();
  const timer = setInterval(() => {
    const next = snapshot();
    const services = servicePids(dataDir);
    const extra = [...driven].flatMap((pids) => pids());
    samples.push({ at: next.at, sample: compare(last, next, [process.pid, ...services.temporal, ...services.redis, ...services.postgres, ...extra]) });
    last = next;
  }, MONITOR_EVERY_MS);
  timer.unref();
  return {
    summary(from, to) {
      const inside = samples.filter((s) => s.at > from && s.at <= to).map((s) => s.sample);
      const mean = (pick: (s: LoadSample) => number): number => (inside.length > 0 ? round(inside.reduce((n, s) => n + pick(s), 0) / inside.length, 3) : 0);
      const byName = new Map<string, number>();
      for (const s of inside) for (const p of s.topOthers) byName.set(p.name, (byName.get(p.name) ?? 0) + p.cores / inside.length);
      return {
        samples: inside.length,
        othersMeanCores: mean((s) => s.othersCores),
        othersMaxCores: inside.reduce((n, s) => Math.max(n, s.othersCores), 0),
        oursMeanCores: mean((s) => s.oursCores),
        stealMeanCores: mean((s) => s.stealCores),
        loadAverage1mMax: inside.reduce((n, s) => Math.max(n, s.loadAverage1m), 0),
        limitOthersMeanCores: OTHERS_DURING_LIMIT_CORES,
        busiestOthers: [...byName]
          .map(([name, cores]) => ({ name, cores: round(cores, 3) }))
          .sort((a, b) => b.cores - a.cores)
          .slice(0, TOP),
      };
    },
    stop: () => clearInterval(timer),
  };
}

/** Why a scenario's figures are not to be trusted (empty = valid). */
export function invalidReasons(gate: GateResult, during: DuringSummary): string[] {
  const reasons = [...gate.reasons];
  if (during.othersMeanCores > during.limitOthersMeanCores) {
    const names = during.busiestOthers
      .filter((p) => p.cores >= 0.01)
      .map((p) => `${p.name} ${p.cores}`)
      .join(', ');
    reasons.push(
      `other processes used ${during.othersMeanCores} cores on average during the scenario (limit ` +
        `${during.limitOthersMeanCores}, max ${during.othersMaxCores})${names ? `; busiest: ${names}` : ''}`,
    );
  }
  return reasons;
}
