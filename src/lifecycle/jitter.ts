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

/** `random` returns [0, 1) like Math.random; tests pass a fixed one. */
export function initialDues(intervals: Intervals, now: number, random: () => number = Math.random, keep: Dues = {}): Dues {
  const dues: Dues = {};
  for (const type of CHECK_TYPES) {
    const interval = intervals[type];
    if (interval === undefined) continue;
    // A due time that survived (rebuild) keeps the card's phase; only new types get jitter.
    dues[type] = keep[type] ?? now + Math.floor(random() * jitterWindowMs(interval));
  }
  return dues;
}
