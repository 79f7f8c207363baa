/**
 * Resident memory of the processes a scenario drives (this process with the workers, the
 * simulator's process, the Temporal server), sampled from /proc during a window, and whether each
 * one levels off: its growth in the window's second half against its first half. For the Node
 * processes also what they keep alive after a major collection (src/runtime/liveHeap.ts): resident
 * memory follows the heap's sizing (the simulator went 111 → 175 → 121 MB in one run, 97 → 99 →
 * 120 in another), live memory is what a leak would grow.
 */
import { readFileSync } from 'node:fs';
import { round } from './stats.js';

/** Samples averaged at each end and at the middle, so one GC swing does not decide the trend. */
const EDGE_SAMPLES = 3;
/** Second-half growth under this many MB is noise, whatever the first half did. */
const FLAT_MB = 16;
/** Levels off: second-half growth at most this share of the first half's (or under FLAT_MB). */
const LEVEL_SHARE = 0.5;
/** Live memory levels off: second-half growth at most this many MB… */
const LIVE_FLAT_MB = 4;
/** …or this share of its level at the middle. */
const LIVE_FLAT_SHARE = 0.05;

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
  /** Process name → live MB after its latest major collection (absent: not a Node process we can ask, or none yet). */
  readonly liveMb?: Readonly<Record<string, number>>;
}

/** A Node process' live bytes after its latest major collection (null before one, or when it cannot tell). */
export type LiveBytesSource = () => Promise<number | null>;

/**
 * Samples `processes` (name → its pids now: pids can change, e.g. a restarted server) every
 * `everyMs` until stopped, and the live memory of those named in `live`.
 */
export function sampleRss(
  processes: Readonly<Record<string, () => readonly number[]>>,
  everyMs: number,
  live: Readonly<Record<string, LiveBytesSource>> = {},
): { stop(): Promise<RssSample[]> } {
  const samples: RssSample[] = [];
  const take = async (): Promise<void> => {
    const at = Date.now();
    const mb: Record<string, number> = {};
    for (const [name, pids] of Object.entries(processes)) {
      const bytes = pids().map(rssBytes);
      if (bytes.some((b) => b !== undefined)) mb[name] = round(bytes.reduce<number>((n, b) => n + (b ?? 0), 0) / 2 ** 20, 1);
    }
    const liveMb: Record<string, number> = {};
    for (const [name, source] of Object.entries(live)) {
      const bytes = await source().catch(() => null);
      if (bytes !== null) liveMb[name] = round(bytes / 2 ** 20, 1);
    }
    samples.push({ at, mb, liveMb });
  };
  let taking = take();
  const timer = setInterval(() => {
    taking = taking.then(take);
  }, everyMs);
  return {
    async stop() {
      clearInterval(timer);
      await taking;
      await take();
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
  /** Live memory after major collections (Node processes that report it): start, middle, end and second-half growth, MB. */
  readonly live: { readonly startMb: number; readonly middleMb: number; readonly endMb: number; readonly secondHalfMb: number } | null;
  /** Resident memory by the RSS rule, or live memory when that is known and flat (see RSS_RULE). */
  readonly levelsOff: boolean;
  /** Which figure decided `levelsOff`. */
  readonly decidedBy: 'rss' | 'live memory';
}

const meanOf = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);

/** Start, middle and end of a series, each the mean of up to EDGE_SAMPLES samples. */
function edges(values: readonly number[]): { start: number; middle: number; end: number } {
  const k = Math.max(1, Math.min(EDGE_SAMPLES, Math.floor(values.length / 3)));
  const from = Math.max(0, Math.floor(values.length / 2) - Math.floor(k / 2));
  return { start: meanOf(values.slice(0, k)), middle: meanOf(values.slice(from, from + k)), end: meanOf(values.slice(-k)) };
}

const series = (samples: readonly RssSample[], pick: (sample: RssSample) => number | undefined): number[] =>
  samples.flatMap((sample) => {
    const mb = pick(sample);
    return mb === undefined ? [] : [mb];
  });

/**
 * Start, middle and end (means of EDGE_SAMPLES samples each) and the verdict per process. Live
 * memory decides only for the processes named in `liveDecides`: those whose memory is the Node
 * heap's. A process running Temporal workers also holds the SDK core's native memory (its
 * workflow cache among it), which the live figure does not see.
 */
export function rssTrends(samples: readonly RssSample[], liveDecides: readonly string[] = []): RssTrend[] {
  const names = [...new Set(samples.flatMap((sample) => Object.keys(sample.mb)))];
  return names.map((name) => {
    const values = series(samples, (sample) => sample.mb[name]);
    const { start, middle, end } = edges(values);
    const first = middle - start;
    const second = end - middle;
    const rssLevels = second <= FLAT_MB || second <= LEVEL_SHARE * Math.max(0, first);
    const liveValues = series(samples, (sample) => sample.liveMb?.[name]);
    const liveEdges = liveValues.length >= 3 ? edges(liveValues) : undefined;
    const live = liveEdges
      ? {
          startMb: round(liveEdges.start, 1),
          middleMb: round(liveEdges.middle, 1),
          endMb: round(liveEdges.end, 1),
          secondHalfMb: round(liveEdges.end - liveEdges.middle, 1),
        }
      : null;
    const liveFlat =
      liveDecides.includes(name) && liveEdges !== undefined && liveEdges.end - liveEdges.middle <= Math.max(LIVE_FLAT_MB, LIVE_FLAT_SHARE * liveEdges.middle);
    return {
      process: name,
      samples: values.length,
      startMb: round(start, 1),
      middleMb: round(middle, 1),
      endMb: round(end, 1),
      firstHalfMb: round(first, 1),
      secondHalfMb: round(second, 1),
      live,
      levelsOff: rssLevels || liveFlat,
      decidedBy: rssLevels || !liveDecides.includes(name) || live === null ? 'rss' : 'live memory',
    };
  });
}

/** The rule rssTrends applies, for the report. */
export const RSS_RULE =
  `levels off = growth in the window's second half ≤ ${FLAT_MB} MB or ≤ ${LEVEL_SHARE * 100} % of the first half's growth ` +
  `(start, middle and end each the mean of ${EDGE_SAMPLES} samples); for a Node process without native heaps (the simulator) whose resident memory grows more, ` +
  `its live memory (heap used + external right after its latest major collection) grows by ≤ ${LIVE_FLAT_MB} MB or ` +
  `≤ ${LIVE_FLAT_SHARE * 100} % in the second half: resident memory above that is the heap's sizing, not memory kept`;
