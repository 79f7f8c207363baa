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
import { describeFailure } from '../db/errors.js';
import type { PriorityTransitions } from '../app/ports.js';
import { toIngestRecord, type IngestRecord, type RecordExecutionInput } from '../ingest/record.js';
import { IngestStreamFull, type IngestStream } from '../ingest/stream.js';
import { writeRecords, type AlertCounts } from '../ingest/writer.js';
import { deletedAccountLine, settleMissingReference } from '../ingest/missingReference.js';
import type { LearnedChangesObserver } from '../ingest/stalenessMetric.js';
import { sameTurnBatcher } from '../runtime/sameTurnBatcher.js';
import { defaultLogger } from '../runtime/logger.js';

export type { RecordExecutionInput } from '../ingest/record.js';

export interface IngestActivityDeps {
  readonly pool: Pool;
  readonly priority: PriorityTransitions;
  /** The async hand-off; without it `enqueueRecord` writes synchronously instead (nothing is lost). */
  readonly stream?: IngestStream;
  /** Where a record dropped with its deleted card is told (default: {@link defaultLogger} at `warn`). */
  readonly log?: (line: string) => void;
  /** Told of the changes a record made known (the staleness metric: src/ingest/stalenessMetric.ts). */
  readonly learned?: LearnedChangesObserver;
}

const NO_ALERTS: AlertCounts = { alertsOpened: 0, alertsRecovered: 0 };

type Written = { readonly ok: true; readonly counts: AlertCounts } | { readonly ok: false; readonly error: unknown };

export function createIngestActivities(deps: IngestActivityDeps) {
  const writer = { pool: deps.pool, priority: deps.priority, ...(deps.learned ? { learned: deps.learned } : {}) };
  const log = deps.log ?? ((line: string) => defaultLogger().warn(line));
  /** A write refused for a reference that is gone, settled (src/ingest/missingReference.ts) and told. */
  const settledWithoutReference = async (record: IngestRecord, error: unknown): Promise<boolean> => {
    const settled = await settleMissingReference(writer, record, error);
    if (settled === 'card_deleted')
      log(`record ${record.recordId}: card ${record.cardId} was deleted before its record; nothing written (${describeFailure(error)})`);
    if (settled === 'written_without_alerts') log(deletedAccountLine(record));
    return settled !== undefined;
  };
  /** The record written now (sync ingest, or a full stream), or settled when a reference is gone. */
  const writeNow = async (record: IngestRecord): Promise<void> => {
    try {
      await writeRecords(writer, [record]);
    } catch (error) {
      if (!(await settledWithoutReference(record, error))) throw error;
    }
  };
  const writeOne = async (record: IngestRecord): Promise<Written> => {
    try {
      const [counts] = (await writeRecords(writer, [record])).perRecord;
      return { ok: true, counts: counts ?? NO_ALERTS };
    } catch (error) {
      return { ok: false, error };
    }
  };
  // The records handed over in one turn (a batch run's record flush: src/activities/bookkeepingBatch.ts)
  // are written as one transaction of multi-row statements, as the async ingest writes its batches.
  // When that fails, each is written on its own: one record that cannot be written fails alone.
  const writeTogether = sameTurnBatcher(async (records: readonly IngestRecord[]): Promise<Written[]> => {
    if (records.length > 1) {
      try {
        return (await writeRecords(writer, records)).perRecord.map((counts) => ({ ok: true, counts }));
      } catch {
        // (each record's own error, if it has one, is what its caller hears)
      }
    }
    return Promise.all(records.map(writeOne));
  });
  return {
    async recordExecution(input: RecordExecutionInput): Promise<AlertCounts> {
      const record = toIngestRecord(input, Date.now());
      const written = await writeTogether(record);
      if (written.ok) return written.counts;
      if (await settledWithoutReference(record, written.error)) return NO_ALERTS;
      throw written.error;
    },

    /**
     * Returns the stream id the record got, or `written` when it was written at once: without a
     * stream, or when the stream is full (INGEST_STREAM_MAX_RECORDS) — then this worker writes it
     * as sync ingest does, and a failure (PostgreSQL away) fails the activity, which the card run
     * retries without limit: the record waits in the run, not in Redis, and is never dropped
     * (unless its card was deleted meanwhile, as in `recordExecution`).
     */
    async enqueueRecord(input: RecordExecutionInput): Promise<string> {
      const record = toIngestRecord(input, Date.now());
      if (!deps.stream) {
        await writeNow(record);
        return 'written';
      }
      try {
        return await deps.stream.enqueue(JSON.stringify(record));
      } catch (error) {
        if (!(error instanceof IngestStreamFull)) throw error;
        await writeNow(record);
        return 'written';
      }
    },
  };
}

export type IngestActivities = ReturnType<typeof createIngestActivities>;
