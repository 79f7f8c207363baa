/**
 * Initial due times for new or re-enabled cards (docs/design.md, 'Lifecycle'): each type due at
 * now + jitter in [0, max(interval / 10, 2 s)) so a batch import does not hit the gateway at once.
 */
import { CHECK_TYPES } from '../workflow-safe/checkTypes.js';
import type { Intervals } from '../domain/pollingConfig.js';
import type { Dues } from './queueStore.js';

/** Lower bound of the jitter window: small intervals still get real spread. */
export const MIN_JITTER_MS = 2000;
const JITTER_FRACTION = 10;

export function jitterWindowMs(intervalSec: number): number {
  return Math.max((intervalSec * 1000) / JITTER_FRACTION, MIN_JITTER_MS);
}

/** `random` returns [0, 1) like Math.random; tests pass a fixed one. `keep`: due times already in Redis. */
export function initialDues(intervals: Intervals, now: number, random: () => number = Math.random, keep: Dues = {}): Dues {
  const dues: Dues = {};
  for (const type of CHECK_TYPES) {
    const interval = intervals[type];
    if (interval === undefined) continue;
    // A due time that survived (an event, a rebuild) keeps the card's phase, but never waits longer
    // than one interval from now: a status or polling config whose interval for the type is shorter
    // must not wait out the longer one first. Only new types get jitter.
    const kept = keep[type];
    dues[type] = kept === undefined ? now + Math.floor(random() * jitterWindowMs(interval)) : Math.min(kept, now + interval * 1000);
  }
  return dues;
}

/**
 * The latest due time each polled type may keep: now + its interval. Passed as the upsert's caps,
 * so Redis keeps the due it holds *when the write lands*, not the one read before it (a finish or
 * another writer may have set a newer one since: docs/design.md, 'Lifecycle').
 */
export function dueCaps(intervals: Intervals, now: number): Dues {
  const caps: Dues = {};
  for (const type of CHECK_TYPES) {
    const interval = intervals[type];
    if (interval !== undefined) caps[type] = now + interval * 1000;
  }
  return caps;
}
