/** Prometheus metrics of the ingest (docs/design.md, 'Operating it': metrics), on the process' registry. */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { IngestBacklog } from './stream.js';

export interface IngestMetrics {
  batchWritten(records: number, written: number, seconds: number): void;
  batchRetried(): void;
  deadLettered(): void;
  backlog(backlog: IngestBacklog): void;
}

/** Several ingest services may share one registry (tests): reuse a metric already registered. */
function once<T>(registry: Registry, name: string, create: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? create();
}

export function createIngestMetrics(registry: Registry): IngestMetrics {
  const records = once(
    registry,
    'cardpoller_ingest_records_total',
    () => new Counter({ name: 'cardpoller_ingest_records_total', help: 'Execution records committed by the async ingest', registers: [registry] }),
  );
  const batches = once(
    registry,
    'cardpoller_ingest_batch_seconds',
    () =>
      new Histogram({
        name: 'cardpoller_ingest_batch_seconds',
        help: 'Time from taking a batch to its commit (retries included)',
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 120],
        registers: [registry],
      }),
  );
  const retries = once(
    registry,
    'cardpoller_ingest_batch_retries_total',
    () => new Counter({ name: 'cardpoller_ingest_batch_retries_total', help: 'Batch write attempts that failed retryably', registers: [registry] }),
  );
  const dead = once(
    registry,
    'cardpoller_ingest_dead_letters_total',
    () => new Counter({ name: 'cardpoller_ingest_dead_letters_total', help: 'Records sent to the dead-letter table', registers: [registry] }),
  );
  const backlogRecords = once(
    registry,
    'cardpoller_ingest_backlog_records',
    () => new Gauge({ name: 'cardpoller_ingest_backlog_records', help: 'Execution records handed to the ingest and not yet committed', registers: [registry] }),
  );
  const backlogAge = once(
    registry,
    'cardpoller_ingest_oldest_pending_age_seconds',
    () => new Gauge({ name: 'cardpoller_ingest_oldest_pending_age_seconds', help: 'Age of the oldest record not yet committed', registers: [registry] }),
  );
  return {
    batchWritten(_records, written, seconds) {
      records.inc(written);
      batches.observe(seconds);
    },
    batchRetried: () => retries.inc(),
    deadLettered: () => dead.inc(),
    backlog(backlog) {
      backlogRecords.set(backlog.records);
      backlogAge.set(backlog.oldestAgeMs / 1000);
    },
  };
}
