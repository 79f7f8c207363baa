/**
 * What the machine sustains, for `npm start`'s live line: the CPU time the demo's processes used
 * over a window (this process — workers and API —, the simulator, the Temporal dev server, from
 * /proc), divided by the checks done in it, gives the CPU cost of a check; the machine's cores
 * divided by that cost is the check rate it could carry at that cost. An estimate at the current
 * mix and shape, printed as such; it does not depend on what else runs beside the demo.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/** Kernel clock ticks per second (USER_HZ); 100 on every Linux build we run on. */
const CLOCK_TICKS = 100;

export interface MeteredProcess {
  readonly label: string;
  readonly pid: number;
}

/** utime + stime of a process in ms; undefined when it is gone or /proc is unreadable. */
function cpuMsOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command (which may contain spaces) start after its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return Number.isFinite(utime) && Number.isFinite(stime) ? ((utime + stime) * 1000) / CLOCK_TICKS : undefined;
  } catch {
    return undefined;
  }
}

/** The pid in a pid file (first line), when the file exists and names a number. */
export function pidFromFile(path: string): number | undefined {
  try {
    const pid = Number(readFileSync(path, 'utf8').split('\n')[0]?.trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

export interface CpuWindow {
  /** CPU ms per check by process label, over the window. */
  readonly perCheckMs: Readonly<Record<string, number>>;
  readonly totalPerCheckMs: number;
  /** Checks/s the machine's cores would carry at that cost. */
  readonly sustainablePerSec: number;
}

/** Call `window(checks)` once per live-line tick: the CPU used since the previous call, per check. */
export function createCpuMeter(processes: readonly MeteredProcess[]): { window(checks: number): CpuWindow | undefined } {
  const read = (): Map<string, number> => {
    const now = new Map<string, number>();
    for (const process of processes) {
      const ms = cpuMsOf(process.pid);
      if (ms !== undefined) now.set(process.label, (now.get(process.label) ?? 0) + ms);
    }
    return now;
  };
  let previous = read();
  return {
    window(checks) {
      const current = read();
      const used = new Map([...current].map(([label, ms]) => [label, ms - (previous.get(label) ?? ms)] as const));
      previous = current;
      if (checks <= 0) return undefined;
      const perCheckMs = Object.fromEntries([...used].map(([label, ms]) => [label, ms / checks]));
      const totalPerCheckMs = [...used.values()].reduce((sum, ms) => sum + ms, 0) / checks;
      return {
        perCheckMs,
        totalPerCheckMs,
        sustainablePerSec: totalPerCheckMs > 0 ? (availableParallelism() * 1000) / totalPerCheckMs : Number.POSITIVE_INFINITY,
      };
    },
  };
}
