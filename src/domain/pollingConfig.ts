/**
 * Polling configs and the merge rule that turns them into
 * a card's intervals. Pure: no I/O.
 */
import { CHECK_TYPES, type CheckType } from '../workflow-safe/checkTypes.js';
import type { CardStatus } from './card.js';

/** Floor for any interval: below it one card would eat a noticeable share of a group's budget. */
export const MIN_INTERVAL_SEC = 1;
/** Ceiling (400 days), matching the column check. */
export const MAX_INTERVAL_SEC = 34_560_000;

export interface PollingMatch {
  readonly carrierId?: string;
  readonly cardStatus?: CardStatus;
}

export type Intervals = Partial<Record<CheckType, number>>;

export interface PollingConfig {
  readonly id: string;
  readonly name: string;
  readonly priority: number;
  readonly enabled: boolean;
  readonly match: PollingMatch;
  readonly intervalsSec: Intervals;
}

export interface NewPollingConfig {
  readonly name: string;
  readonly priority?: number;
  readonly enabled?: boolean;
  readonly match?: PollingMatch;
  readonly intervalsSec: Intervals;
}

export type PollingConfigPatch = Partial<NewPollingConfig>;

/** What a rule is matched against. */
export interface MatchSubject {
  readonly carrierId: string;
  readonly status: string;
}

export function matches(match: PollingMatch, card: MatchSubject): boolean {
  if (match.carrierId !== undefined && match.carrierId !== card.carrierId) return false;
  if (match.cardStatus !== undefined && match.cardStatus !== card.status) return false;
  return true;
}

/** Higher priority first; ties go to the older rule (lower id) so the result is deterministic. */
export function byPrecedence(a: PollingConfig, b: PollingConfig): number {
  if (a.priority !== b.priority) return b.priority - a.priority;
  return Number(BigInt(a.id) - BigInt(b.id));
}

/**
 * A card's intervals: per type, from the highest-priority enabled matching rule that sets it.
 * A type absent from the result is not polled. `configs` need not be sorted.
 */
export function mergeIntervals(configs: readonly PollingConfig[], card: MatchSubject): Intervals {
  const sorted = [...configs].filter((config) => config.enabled).sort(byPrecedence);
  const merged: Intervals = {};
  for (const config of sorted) {
    if (!matches(config.match, card)) continue;
    for (const type of CHECK_TYPES) {
      const seconds = config.intervalsSec[type];
      if (merged[type] === undefined && seconds !== undefined) merged[type] = seconds;
    }
  }
  return merged;
}

/** Pre-sorted view for merging many cards against one snapshot of configs. */
export class IntervalResolver {
  private readonly sorted: readonly PollingConfig[];
  private readonly cache = new Map<string, Intervals>();
  private readonly accountTypes = new Map<string, CheckType[]>();

  constructor(configs: readonly PollingConfig[]) {
    this.sorted = [...configs].filter((config) => config.enabled).sort(byPrecedence);
  }

  /** The shortest interval any enabled config sets (ms), or null without one. */
  shortestMs(): number | null {
    let shortest: number | null = null;
    for (const config of this.sorted) {
      for (const seconds of Object.values(config.intervalsSec)) {
        if (seconds !== undefined && (shortest === null || seconds * 1000 < shortest)) shortest = seconds * 1000;
      }
    }
    return shortest;
  }

  /**
   * The types some enabled config polls for the account's cards, whatever their status: a due of
   * any other type is left over from an older config (the claim drops it, lua/claim.lua).
   */
  typesPolledBy(carrierId: string): CheckType[] {
    let types = this.accountTypes.get(carrierId);
    if (!types) {
      const polled = new Set<CheckType>();
      for (const config of this.sorted) {
        if (config.match.carrierId !== undefined && config.match.carrierId !== carrierId) continue;
        for (const type of CHECK_TYPES) if (config.intervalsSec[type] !== undefined) polled.add(type);
      }
      types = CHECK_TYPES.filter((type) => polled.has(type));
      this.accountTypes.set(carrierId, types);
    }
    return types;
  }

  /** Rules match on (carrier, status) only, so results are cached per pair. */
  resolve(card: MatchSubject): Intervals {
    const key = `${card.carrierId}\u0000${card.status}`;
    let intervals = this.cache.get(key);
    if (!intervals) {
      intervals = mergeIntervals(this.sorted, card);
      this.cache.set(key, intervals);
    }
    return intervals;
  }
}
