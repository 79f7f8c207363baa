/**
 * Backpressure from the ingest onto claiming (docs/design.md, 'PostgreSQL and records'): polling
 * must never outrun what PostgreSQL absorbs. The backlog — records handed over and not committed —
 * is read from Redis (it must be readable while PostgreSQL is away) and compared with two
 * thresholds, a count and an age; above either, each account's in-flight limit shrinks in
 * proportion to how far over it is, down to one card, so polling goes on (slowly) while the backlog
 * drains.
 */
import type { IngestBacklog, IngestStream } from './stream.js';

export interface BacklogThresholds {
  /** Records pending above which the backlog counts as high. */
  readonly records: number;
  /** Age of the oldest pending record above which it counts as high. */
  readonly maxAgeMs: number;
}

export interface IngestPressureState extends IngestBacklog {
  /** max(records / threshold, age / max age): above 1 the backlog is high. */
  readonly ratio: number;
  /** Whether claiming is tightened now. */
  readonly tightened: boolean;
}

export function backlogRatio(backlog: IngestBacklog, thresholds: BacklogThresholds): number {
  return Math.max(backlog.records / Math.max(1, thresholds.records), backlog.oldestAgeMs / Math.max(1, thresholds.maxAgeMs));
}

/**
 * The in-flight limit an account may use under this backlog: unchanged while the backlog is
 * below its thresholds, else halved at the threshold and shrinking further as the backlog grows
 * (limit / (2 × ratio)), never below one card.
 */
export function tightenedInflightLimit(limit: number, ratio: number): number {
  if (ratio <= 1) return limit;
  return Math.max(1, Math.min(limit, Math.floor(limit / (2 * ratio))));
}

export interface IngestPressure {
  state(): Promise<IngestPressureState>;
  /** The account's in-flight limit after backpressure (claimRound calls this once per round). */
  inflightLimit(limit: number): Promise<number>;
}

const RELAXED: IngestPressureState = { records: 0, oldestAgeMs: 0, ratio: 0, tightened: false };

/**
 * Reads the backlog at most once per `cacheMs` per process (every account's claim round asks). A
 * failed read tightens nothing: the claim that follows needs the same Redis and fails anyway.
 */
export function createIngestPressure(stream: IngestStream, thresholds: BacklogThresholds, options: { cacheMs?: number } = {}): IngestPressure {
  const cacheMs = options.cacheMs ?? 500;
  let cached: { at: number; state: Promise<IngestPressureState> } | undefined;
  const read = async (): Promise<IngestPressureState> => {
    try {
      const backlog = await stream.backlog();
      const ratio = backlogRatio(backlog, thresholds);
      return { ...backlog, ratio, tightened: ratio > 1 };
    } catch {
      return RELAXED;
    }
  };
  const state = (): Promise<IngestPressureState> => {
    const now = Date.now();
    if (!cached || now - cached.at >= cacheMs) cached = { at: now, state: read() };
    return cached.state;
  };
  return {
    state,
    async inflightLimit(limit) {
      return tightenedInflightLimit(limit, (await state()).ratio);
    },
  };
}
