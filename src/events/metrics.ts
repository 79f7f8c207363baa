/**
 * `cardpoller_events_total{outcome}`: pushed carrier events by what became of them — at the API
 * (`accepted`, `duplicate`, `invalid`, `unauthorized`, `throttled`) and in the applier (`applied`,
 * `unknown_card`). One counter shared by the API and the ingest worker of a process.
 */
import { Counter, type Registry } from 'prom-client';

const NAME = 'cardpoller_events_total';

export type EventOutcome = 'accepted' | 'duplicate' | 'invalid' | 'unauthorized' | 'throttled' | 'applied' | 'unknown_card';

export type EventCounter = (outcome: EventOutcome, count?: number) => void;

export function eventCounter(registry: Registry): EventCounter {
  const counter =
    (registry.getSingleMetric(NAME) as Counter<'outcome'> | undefined) ??
    new Counter({ name: NAME, help: 'Pushed carrier events by outcome (API answer, then application)', labelNames: ['outcome'], registers: [registry] });
  return (outcome, count = 1) => {
    if (count > 0) counter.inc({ outcome }, count);
  };
}
