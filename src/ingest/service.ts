/**
 * The async ingest of one process: the stream consumer writing batches and the backlog monitor.
 * It runs wherever the `polling-ingest` worker runs, in either ingest mode: after a switch back
 * to sync, what async mode handed over is still written.
 */
import type { RedisConnection } from '../redis/connection.js';
import type { Registry } from 'prom-client';
import type { Config } from '../config/index.js';
import type { Pool } from '../db/pool.js';
import { logConnectionErrors } from '../runtime/connectionErrors.js';
import { defaultLogger, type LogSink } from '../runtime/logger.js';
import type { PriorityTransitions } from '../app/ports.js';
import { IngestConsumer } from './consumer.js';
import { createIngestMetrics } from './metrics.js';
import { BacklogMonitor } from './monitor.js';
import type { BacklogThresholds } from './pressure.js';
import { IngestStream } from './stream.js';
import { stalenessObserver } from './stalenessMetric.js';
import { EventApplierLoop } from '../events/applierLoop.js';
import { eventCounter } from '../events/metrics.js';
import type { CarrierQueueStore } from '../redis/carrierQueueStore.js';
import type { ReferenceData } from '../runtime/referenceData.js';

export interface IngestSettings {
  readonly concurrency: number;
  readonly batchSize: number;
  readonly thresholds: BacklogThresholds;
}

export function ingestSettings(config: Config): IngestSettings {
  return {
    concurrency: config.INGEST_CONCURRENCY,
    batchSize: config.INGEST_BATCH_SIZE,
    thresholds: { records: config.INGEST_BACKLOG_THRESHOLD, maxAgeMs: config.INGEST_BACKLOG_MAX_AGE_MS },
  };
}

export interface IngestServiceInput {
  readonly redis: RedisConnection;
  /** Redis key namespace (REDIS_KEY_PREFIX). */
  readonly namespace: string;
  readonly pool: Pool;
  readonly priority: PriorityTransitions;
  readonly settings: IngestSettings;
  readonly registry?: Registry;
  readonly reclaimIdleMs?: number;
  readonly monitorIntervalMs?: number;
  /** The process' logger: the consumer's and monitor's lines at `warn`, the read connection's errors (default: {@link defaultLogger}). */
  readonly logger?: Pick<LogSink, 'error' | 'warn' | 'info'>;
  /** With these, the process also applies pushed carrier events (src/events/applierLoop.ts). */
  readonly events?: { readonly store: CarrierQueueStore; readonly reference: ReferenceData };
}

export interface IngestService {
  readonly stream: IngestStream;
  readonly consumer: IngestConsumer;
  readonly monitor: BacklogMonitor;
  readonly events?: EventApplierLoop;
  stop(): Promise<void>;
}

/** Pool connections the ingest's batches leave to everything else of the process. */
const POOL_HEADROOM = 4;

/**
 * Batches written at once, at most the pool's size minus a few connections. A batch that waits on
 * PostgreSQL (locked tables, a stalled server) holds its connection: without the headroom, the
 * ingest of a process that also runs card and control workers (src/workers/all.ts, the benches)
 * takes every connection, and the reads polling needs — reference data, card rows — queue behind
 * it, so polling stops exactly when the async ingest should let it go on (docs/design.md,
 * 'PostgreSQL and records').
 */
export function writerSlots(pool: Pool, concurrency: number): number {
  const max = (pool as { options?: { max?: unknown } }).options?.max;
  if (typeof max !== 'number' || !Number.isFinite(max)) return concurrency;
  return Math.max(1, Math.min(concurrency, max - POOL_HEADROOM));
}

export function startIngest(input: IngestServiceInput): IngestService {
  const logger = input.logger ?? defaultLogger();
  const log = (line: string): void => logger.warn(line);
  const stream = new IngestStream(input.redis, input.namespace);
  const metrics = input.registry ? createIngestMetrics(input.registry) : undefined;
  const learned = input.registry ? stalenessObserver(input.registry) : undefined;
  // The blocking read holds a connection: its own, so other commands never queue behind it.
  const readConnection = input.redis.duplicate();
  logConnectionErrors(readConnection, 'redis(ingest-read)', { logger });
  const consumer = new IngestConsumer({
    stream,
    readConnection,
    writer: { pool: input.pool, priority: input.priority, ...(learned ? { learned } : {}) },
    concurrency: writerSlots(input.pool, input.settings.concurrency),
    batchSize: input.settings.batchSize,
    ...(input.reclaimIdleMs === undefined ? {} : { reclaimIdleMs: input.reclaimIdleMs }),
    ...(metrics ? { metrics } : {}),
    log,
  });
  const monitor = new BacklogMonitor({
    stream,
    redis: input.redis,
    pool: input.pool,
    thresholds: input.settings.thresholds,
    owner: consumer.name,
    ...(metrics ? { metrics } : {}),
    ...(input.monitorIntervalMs === undefined ? {} : { intervalMs: input.monitorIntervalMs }),
    log,
  });
  const events = input.events
    ? new EventApplierLoop({
        pool: input.pool,
        ...input.events,
        ...(learned ? { learned } : {}),
        ...(input.registry ? { count: eventCounter(input.registry) } : {}),
        log,
      })
    : undefined;
  consumer.start();
  monitor.start();
  events?.start();
  let stopping: Promise<void> | undefined;
  return {
    stream,
    consumer,
    monitor,
    ...(events ? { events } : {}),
    stop() {
      stopping ??= Promise.all([consumer.stop(), monitor.stop(), events?.stop()]).then(() => undefined);
      return stopping;
    },
  };
}
