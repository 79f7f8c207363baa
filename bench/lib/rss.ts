/**
 * Resident memory of the processes a scenario drives (this process with the workers, the
 * simulator's process, the Temporal server), sampled from /proc during a window, and whether each
 * one levels off: its growth in the window's second half against its first half. Resident memory
 * follows the heaps' sizing (the simulator went 111 → 175 → 121 MB in one run, 97 → 99 → 120 in
 * another), so where a process can say more, the sample also holds what it keeps alive (its live
 * memory: what a leak would grow) and what its managed heaps (V8's, Go's) hold from the OS: resident
 * memory less that is the memory outside the heaps (native allocations, the Temporal SDK core's).
 */
import { readFileSync } from 'node:fs';
import { round } from './stats.js';

/** Samples averaged at each end and at the middle, so one GC swing does not decide the trend. */
const EDGE_SAMPLES = 3;
/** Second-half growth under this many MB is noise, whatever the first half did. */
const FLAT_MB = 16;
/** Levels off: second-half growth at most this share of the first half's (or under FLAT_MB). */
const LEVEL_SHARE = 0.5;
/** Live memory's start, middle and end are each the floor (memory outside the heaps: the mean) of this share of the samples (at least EDGE_SAMPLES). */
const LIVE_EDGE_SHARE = 0.1;
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
  /** Process name → live MB (absent: a process we cannot ask, or no figure yet). */
  readonly liveMb?: Readonly<Record<string, number>>;
  /** Process name → MB its managed heaps hold (absent: not known). */
  readonly heapMb?: Readonly<Record<string, number>>;
}

/** What a process reports of its memory, for sampleRss. */
export interface HeapFigures {
  /**
   * Bytes kept alive: right after a major collection, or a heap-in-use figure whose floor over a
   * stretch of samples is that (rssTrends takes floors); null when not known yet.
   */
  readonly liveBytes: number | null;
  /** Bytes its managed heaps hold from the OS; absent for a process whose memory is all its heap's. */
  readonly heapBytes?: number;
}

export type HeapSource = () => Promise<HeapFigures | null>;

/**
 * Samples `processes` (name → its pids now: pids can change, e.g. a restarted server) every
 * `everyMs` until stopped, and the heap figures of those named in `heaps`.
 */
export function sampleRss(
  processes: Readonly<Record<string, () => readonly number[]>>,
  everyMs: number,
  heaps: Readonly<Record<string, HeapSource>> = {},
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
    const heapMb: Record<string, number> = {};
    for (const [name, source] of Object.entries(heaps)) {
      const figures = await source().catch(() => null);
      if (figures?.liveBytes != null) liveMb[name] = round(figures.liveBytes / 2 ** 20, 1);
      if (figures?.heapBytes !== undefined) heapMb[name] = round(figures.heapBytes / 2 ** 20, 1);
    }
    samples.push({ at, mb, liveMb, heapMb });
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
  /** Live memory (processes that report it): start, middle and end (floors) and second-half growth, MB. */
  readonly live: EdgeFigures | null;
  /** Resident memory less what the managed heaps hold (processes that report their heaps): start, middle, end, second-half growth, MB. */
  readonly outsideHeaps: (EdgeFigures & { readonly firstHalfMb: number }) | null;
  /** By the RSS rule, or by live memory (and the memory outside the heaps) when resident memory alone does not (see RSS_RULE). */
  readonly levelsOff: boolean;
  /** Which figures decided `levelsOff`. */
  readonly decidedBy: 'rss' | 'live memory' | 'live memory and memory outside the heaps';
}

interface EdgeFigures {
  readonly startMb: number;
  readonly middleMb: number;
  readonly endMb: number;
  readonly secondHalfMb: number;
}

const meanOf = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);

/** Start, middle and end of a series, each `of` (mean, floor) up to `size` samples. */
function edges(
  values: readonly number[],
  size = EDGE_SAMPLES,
  of: (values: readonly number[]) => number = meanOf,
): { start: number; middle: number; end: number } {
  const k = Math.max(1, Math.min(size, Math.floor(values.length / 3)));
  const from = Math.max(0, Math.floor(values.length / 2) - Math.floor(k / 2));
  return { start: of(values.slice(0, k)), middle: of(values.slice(from, from + k)), end: of(values.slice(-k)) };
}

const floorOf = (values: readonly number[]): number => Math.min(...values);

/** Levels off by the RSS rule: second-half growth small, or at most a share of the first half's. */
const levelsByRssRule = (first: number, second: number): boolean => second <= FLAT_MB || second <= LEVEL_SHARE * Math.max(0, first);

const edgeFigures = (e: { start: number; middle: number; end: number }): EdgeFigures => ({
  startMb: round(e.start, 1),
  middleMb: round(e.middle, 1),
  endMb: round(e.end, 1),
  secondHalfMb: round(e.end - e.middle, 1),
});

const series = (samples: readonly RssSample[], pick: (sample: RssSample) => number | undefined): number[] =>
  samples.flatMap((sample) => {
    const mb = pick(sample);
    return mb === undefined ? [] : [mb];
  });

/**
 * Start, middle and end and the verdict per process. Resident memory decides when it levels off by
 * itself. Otherwise live memory decides: alone for the processes named in `liveAlone` (a Node
 * process whose memory is its heap's), together with the memory outside the managed heaps for a
 * process that reports its heaps (that part must level off by the RSS rule: a native leak shows
 * there). A process that reports neither is judged by resident memory.
 */
export function rssTrends(samples: readonly RssSample[], liveAlone: readonly string[] = []): RssTrend[] {
  const names = [...new Set(samples.flatMap((sample) => Object.keys(sample.mb)))];
  return names.map((name) => {
    const values = series(samples, (sample) => sample.mb[name]);
    const { start, middle, end } = edges(values);
    const first = middle - start;
    const second = end - middle;
    const rssLevels = levelsByRssRule(first, second);
    const liveValues = series(samples, (sample) => sample.liveMb?.[name]);
    const liveEdges = liveValues.length >= 3 ? edges(liveValues, Math.max(EDGE_SAMPLES, Math.round(LIVE_EDGE_SHARE * liveValues.length)), floorOf) : undefined;
    const outsideValues = series(samples, (sample) => {
      const heap = sample.heapMb?.[name];
      const rss = sample.mb[name];
      return heap === undefined || rss === undefined ? undefined : rss - heap;
    });
    // A difference of two samples taken apart: wider edges than resident memory's.
    const outsideEdges =
      outsideValues.length >= 3 ? edges(outsideValues, Math.max(EDGE_SAMPLES, Math.round(LIVE_EDGE_SHARE * outsideValues.length))) : undefined;
    const liveFlat = liveEdges !== undefined && liveEdges.end - liveEdges.middle <= Math.max(LIVE_FLAT_MB, LIVE_FLAT_SHARE * liveEdges.middle);
    const outsideLevels = outsideEdges !== undefined && levelsByRssRule(outsideEdges.middle - outsideEdges.start, outsideEdges.end - outsideEdges.middle);
    const by: RssTrend['decidedBy'] =
      rssLevels || liveEdges === undefined
        ? 'rss'
        : liveAlone.includes(name)
          ? 'live memory'
          : outsideEdges !== undefined
            ? 'live memory and memory outside the heaps'
            : 'rss';
    const levelsOff = by === 'rss' ? rssLevels : by === 'live memory' ? liveFlat : liveFlat && outsideLevels;
    return {
      process: name,
      samples: values.length,
      startMb: round(start, 1),
      middleMb: round(middle, 1),
      endMb: round(end, 1),
      firstHalfMb: round(first, 1),
      secondHalfMb: round(second, 1),
      live: liveEdges ? edgeFigures(liveEdges) : null,
      outsideHeaps: outsideEdges ? { ...edgeFigures(outsideEdges), firstHalfMb: round(outsideEdges.middle - outsideEdges.start, 1) } : null,
      levelsOff,
      decidedBy: by,
    };
  });
}

/** The rule rssTrends applies, for the report. */
export const RSS_RULE =
  `levels off = growth in the window's second half ≤ ${FLAT_MB} MB or ≤ ${LEVEL_SHARE * 100} % of the first half's growth ` +
  `(start, middle and end each the mean of ${EDGE_SAMPLES} samples). Where resident memory grows more, live memory decides ` +
  `(start, middle and end each the floor of ${LIVE_EDGE_SHARE * 100} % of the samples, at least ${EDGE_SAMPLES}): it must grow by ≤ ${LIVE_FLAT_MB} MB or ` +
  `≤ ${LIVE_FLAT_SHARE * 100} % in the second half — alone for a Node process whose memory is its heap's (the simulator), and for a process ` +
  `with memory outside its managed heaps (the workers' process: the SDK core; the Temporal server) its resident memory less what ` +
  `its heaps hold must also level off by the first rule (its start, middle and end each the mean of as many samples as live memory's). ` +
  `Resident memory above that is the heaps' sizing, not memory kept`;
