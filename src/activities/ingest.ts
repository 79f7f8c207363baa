/**
 * Ingest activities of an execution's durable record (docs/design.md, 'PostgreSQL and records'):
 * observations with out-of-order protection, the execution row, failure alerts opened/recovered,
 * the priority item's transition.
 *
 * - `recordExecution` (sync ingest): the card worker writes the record itself, as a local
 *   activity. Every write is idempotent (unique keys + ON CONFLICT), so a retry lands on the same rows.
 * - `enqueueRecord` (async ingest): the record is handed to the ingest stream in Redis and the
 *   execution ends without waiting for PostgreSQL; the ingest workers write it in batches
 *   (src/ingest/consumer.ts) — the same rows (src/ingest/rows.ts).
 */
import type { Pool } from '../db/pool.js';
import type { PriorityTransitions } from '../app/ports.js';
import { toIngestRecord, type RecordExecutionInput } from '../ingest/record.js';
import { IngestStreamFull, type IngestStream } from '../ingest/stream.js';
import { writeRecords } from '../ingest/writer.js';

export type { RecordExecutionInput } from '../ingest/record.js';

export interface IngestActivityDeps {
  readonly pool: Pool;
  readonly priority: PriorityTransitions;
  /** The async hand-off; without it `enqueueRecord` writes synchronously instead (nothing is lost). */
  readonly stream?: IngestStream;
}

export function createIngestActivities(deps: IngestActivityDeps) {
  const writer = { pool: deps.pool, priority: deps.priority };
  return {
    async recordExecution(input: RecordExecutionInput): Promise<{ alertsOpened: number; alertsRecovered: number }> {
      const written = await writeRecords(writer, [toIngestRecord(input, Date.now())]);
      return { alertsOpened: written.alertsOpened, alertsRecovered: written.alertsRecovered };
    },

    /**
     * Returns the stream id the record got, or `written` when it was written at once: without a
     * stream, or when the stream is full (INGEST_STREAM_MAX_RECORDS) — then this worker writes it
     * as sync ingest does, and a failure (PostgreSQL away) fails the activity, which the card run
     * retries without limit: the record waits in the run, not in Redis, and is never dropped.
     */
    async enqueueRecord(input: RecordExecutionInput): Promise<string> {
      const record = toIngestRecord(input, Date.now());
      if (!deps.stream) {
        await writeRecords(writer, [record]);
        return 'written';
      }
      try {
        return await deps.stream.enqueue(JSON.stringify(record));
      } catch (error) {
        if (!(error instanceof IngestStreamFull)) throw error;
        await writeRecords(writer, [record]);
        return 'written';
      }
    },
  };
}

export type IngestActivities = ReturnType<typeof createIngestActivities>;
