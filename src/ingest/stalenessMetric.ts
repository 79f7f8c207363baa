/**
 * `cardpoller_staleness_seconds`: per account and check type, from a change at the carrier (as its
 * answer dated it) to the first observation that carried it, observed once per change when its
 * record lands (docs/design.md, 'Freshness'). Sync ingest observes it in the card worker, async
 * ingest in the ingest worker; a process running both shares one histogram.
 */
import { Histogram, type Registry } from 'prom-client';
import type { LearnedChange } from '../db/cardChanges.js';

const NAME = 'cardpoller_staleness_seconds';
/** Changes wait from seconds (pushed events) to a sweep of a large fleet (hours). */
const BUCKETS = [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21_600, 86_400];

export type LearnedChangesObserver = (changes: readonly LearnedChange[]) => void;

export function stalenessObserver(registry: Registry): LearnedChangesObserver {
  const histogram =
    (registry.getSingleMetric(NAME) as Histogram<'carrier' | 'type'> | undefined) ??
    new Histogram({
      name: NAME,
      help: 'From a change at the carrier (its answer dated it) to the first observation carrying it, by account and check type',
      labelNames: ['carrier', 'type'],
      buckets: BUCKETS,
      registers: [registry],
    });
  return (changes) => {
    for (const change of changes) histogram.observe({ carrier: change.carrierId, type: change.type }, change.stalenessMs / 1000);
  };
}
