/**
 * Writes execution records to PostgreSQL: one record at a time for sync ingest, many across
 * executions for async ingest — the same rows either way (src/ingest/rows.ts).
 *
 * A batch is two multi-row statements in one transaction — every execution row, every
 * observation (with the card's latest values only moved forward in time) — plus a statement per
 * alert transition (a failure, a success after a failure streak). Every statement is idempotent (unique
 * keys + ON CONFLICT, guarded updates), so a batch retried whole or delivered twice lands on the
 * same rows. Priority items move after the commit: their transitions are guarded by the claim
 * token, hence idempotent too, and they write their own audit records in their own transactions.
 */
import { withTransaction, type Pool } from '../db/pool.js';
import type { Queryable } from '../db/queryable.js';
import { insertObservations } from '../db/observations.js';
import { insertChanges, type LearnedChange } from '../db/cardChanges.js';
import type { LearnedChangesObserver } from './stalenessMetric.js';
import { insertExecutions } from '../db/executions.js';
import { lockFailureAlerts, recordFailureIn, recoverFailures } from '../db/alerts.js';
import type { PriorityTransitions } from '../app/ports.js';
import type { IngestRecord } from './record.js';
import { rowsOf, type RecordRows } from './rows.js';

export interface RecordWriterDeps {
  readonly pool: Pool;
  readonly priority: PriorityTransitions;
  /** Runs after the rows are written, before the commit (tests hold a transaction open with it). */
  readonly beforeCommit?: () => Promise<void>;
  /** Told, once written, of the changes the records made known for the first time (src/ingest/stalenessMetric.ts). */
  readonly learned?: LearnedChangesObserver;
}

export interface WriteResult {
  readonly records: number;
  readonly executionsInserted: number;
  readonly observationsInserted: number;
  readonly alertsOpened: number;
  readonly alertsRecovered: number;
  /** The same two counts per record, in the order of the records. */
  readonly perRecord: readonly AlertCounts[];
}

export interface AlertCounts {
  readonly alertsOpened: number;
  readonly alertsRecovered: number;
}

async function writeRows(db: Queryable, rows: readonly RecordRows[]): Promise<Omit<WriteResult, 'records'> & { readonly learned: LearnedChange[] }> {
  // Alerts first, record by record in hand-off order (one card's executions are handed over in
  // the order they ran): a failure that opens an alert and the success that recovers it may share
  // a batch. Before this batch's execution rows exist, the out-of-order guard of a failure sees
  // only executions that were handed over earlier — a newer success that overtook it.
  const perRecord: AlertCounts[] = [];
  for (const row of rows) {
    let alertsOpened = 0;
    const alertsRecovered = row.recoveries.length > 0 ? await recoverFailures(db, row.recoveries) : 0;
    for (const failure of row.failures) {
      const { cardId, carrierId, type, failCount, error, at, startedAt, firstFailedAt } = failure;
      const recorded = await recordFailureIn(db, {
        cardId,
        carrierId,
        type,
        failCount,
        error,
        now: at,
        startedAt,
        ...(firstFailedAt ? { firstFailedAt } : {}),
      });
      if (recorded.opened) alertsOpened += 1;
    }
    perRecord.push({ alertsOpened, alertsRecovered });
  }
  const executionsInserted = await insertExecutions(
    db,
    rows.map((r) => r.execution),
  );
  // Before the observations: a change counts against the card's latest observation before this write.
  const learned = await insertChanges(
    db,
    rows.flatMap((r) => r.changes),
  );
  const observations = await insertObservations(
    db,
    rows.flatMap((r) => r.observations),
  );
  return {
    executionsInserted,
    observationsInserted: observations.inserted,
    alertsOpened: perRecord.reduce((sum, r) => sum + r.alertsOpened, 0),
    alertsRecovered: perRecord.reduce((sum, r) => sum + r.alertsRecovered, 0),
    perRecord,
    learned,
  };
}

/**
 * Writes the records; throws when any statement fails (nothing of a transactional batch is then
 * kept; the caller retries it whole or isolates the record that cannot be written).
 */
export async function writeRecords(
  deps: RecordWriterDeps,
  records: readonly IngestRecord[],
  /** `alerts: false`: the records' executions and observations only (their account is gone: src/activities/ingest.ts). */
  options: { readonly alerts?: boolean } = {},
): Promise<WriteResult> {
  if (records.length === 0) return { records: 0, executionsInserted: 0, observationsInserted: 0, alertsOpened: 0, alertsRecovered: 0, perRecord: [] };
  const rows = records.map(rowsOf).map((row) => (options.alerts === false ? { ...row, failures: [], recoveries: [] } : row));
  // The (card, type) pairs whose alerts this write may open or recover: locked for the transaction
  // (see lockFailureAlerts), so a concurrent batch with the same card's records waits for this one.
  const alertKeys = rows.flatMap((row) => [...row.recoveries, ...row.failures]);
  const write = async (db: Queryable): Promise<Omit<WriteResult, 'records'> & { readonly learned: LearnedChange[] }> => {
    const result = await writeRows(db, rows);
    await deps.beforeCommit?.();
    return result;
  };
  // One record without alerts needs no transaction (each statement is idempotent on its own), saving BEGIN and COMMIT.
  const { learned, ...written } =
    records.length === 1 && alertKeys.length === 0
      ? await write(deps.pool)
      : await withTransaction(deps.pool, async (client) => {
          await lockFailureAlerts(client, alertKeys);
          return write(client);
        });
  // Committed: a retry of this write learns nothing again (the rows hold the changes).
  if (learned.length > 0) deps.learned?.(learned);
  for (const record of records) {
    if (record.plan.priorityItemId !== undefined) await deps.priority.executionFinished(record);
  }
  return { records: records.length, ...written };
}
