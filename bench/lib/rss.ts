/**
 * Resident memory of the processes a scenario drives (this process with the workers, the
 * simulator's process, the Temporal server), sampled from /proc during a window, and whether each
 * one levels off: its growth in the window's second half against its first half.
 */
import { readFileSync } from 'node:fs';
import { round } from './stats.js';

/** Samples averaged at each end and at the middle, so one GC swing does not decide the trend. */
const EDGE_SAMPLES = 3;
/** Second-half growth under this many MB is noise, whatever the first half did. */
const FLAT_MB = 16;
/** Levels off: second-half growth at most this share of the first half's (or under FLAT_MB). */
const LEVEL_SHARE = 0.5;

/** VmRSS of a process in bytes; undefined when it is gone. */
export function rssBytes(pid: number): number | undefined {
  try {
    const kb = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

export interface RssSample {
  readonly at: number;
  /** Process name → MB (sum over its pids; absent when none was alive). */
  readonly mb: Readonly<Record<string, number>>;
}

/** Samples `processes` (name → its pids now: pids can change, e.g. a restarted server) every `everyMs` until stopped. */
export function sampleRss(processes: Readonly<Record<string, () => readonly number[]>>, everyMs: number): { stop(): RssSample[] } {
  const samples: RssSample[] = [];
  const take = (): void => {
    const mb: Record<string, number> = {};
    for (const [name, pids] of Object.entries(processes)) {
      const bytes = pids().map(rssBytes);
      if (bytes.some((b) => b !== undefined)) mb[name] = round(bytes.reduce<number>((n, b) => n + (b ?? 0), 0) / 2 ** 20, 1);
    }
    samples.push({ at: Date.now(), mb });
  };
  take();
  const timer = setInterval(take, everyMs);
  return {
    stop() {
      clearInterval(timer);
      take();
      return samples;
    },
  };
}

export interface RssTrend {
  readonly process: string;
  readonly samples: number;
  readonly startMb: number;
  readonly middleMb: number;
  readonly endMb: number;
  readonly firstHalfMb: number;
  readonly secondHalfMb: number;
  readonly levelsOff: boolean;
}

const meanOf = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);

/** Start, middle and end (means of EDGE_SAMPLES samples each) and the verdict per process. */
export function rssTrends(samples: readonly RssSample[]): RssTrend[] {
  const names = [...new Set(samples.flatMap((sample) => Object.keys(sample.mb)))];
  return names.map((name) => {
    const values = samples.flatMap((sample) => {
      const mb = sample.mb[name];
      return mb === undefined ? [] : [mb];
    });
    const k = Math.max(1, Math.min(EDGE_SAMPLES, Math.floor(values.length / 3)));
    const mid = Math.floor(values.length / 2);
    const start = meanOf(values.slice(0, k));
    const middle = meanOf(values.slice(Math.max(0, mid - Math.floor(k / 2)), Math.max(0, mid - Math.floor(k / 2)) + k));
    const end = meanOf(values.slice(-k));
    const first = middle - start;
    const second = end - middle;
    return {
      process: name,
      samples: values.length,
      startMb: round(start, 1),
      middleMb: round(middle, 1),
      endMb: round(end, 1),
      firstHalfMb: round(first, 1),
      secondHalfMb: round(second, 1),
      levelsOff: second <= FLAT_MB || second <= LEVEL_SHARE * Math.max(0, first),
    };
  });
}

/** The rule rssTrends applies, for the report. */
export const RSS_RULE =
  `levels off = growth in the window's second half ≤ ${FLAT_MB} MB or ≤ ${LEVEL_SHARE * 100} % of the first half's growth ` +
  `(start, middle and end each the mean of ${EDGE_SAMPLES} samples)`;
