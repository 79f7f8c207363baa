/**
 * Storage upkeep, run hourly by the storageMaintenance workflow: the observation partitions of the
 * coming months exist before rows arrive, and data past retention goes — observations by dropping
 * whole monthly partitions (no DELETE, no bloat), execution rows by batched deletes, and so do the
 * other tables that grow with time: the audit trail, finished priority items, closed alerts,
 * ingest dead letters (open ones stay whatever their age) and learned changes (card_change).
 *
 * A month whose partition is missing sends its rows to the DEFAULT partition; PostgreSQL then
 * refuses to create that month's partition (the default would hold rows of its range), so such a
 * month is repaired by moving its rows out of the default in one transaction.
 */
import type { Pool } from './pool.js';
import { withTransaction } from './pool.js';

export interface RetentionPolicy {
  /** Months of data kept, the current month included. */
  readonly keepMonths: number;
  /** Partitions created ahead, the current month included. */
  readonly monthsAhead: number;
  /** Execution rows deleted per statement (short transactions, short locks). */
  readonly deleteBatch?: number;
  /** Days applied pushed events are kept (default: as long as the rest). */
  readonly eventDays?: number;
}

export interface MaintenanceResult {
  readonly partitionsCreated: string[];
  /** Months whose rows waited in the DEFAULT partition and were moved into their new partition. */
  readonly rowsMovedFromDefault: number;
  readonly partitionsDropped: string[];
  readonly defaultRowsDeleted: number;
  readonly executionsDeleted: number;
  /** Rows past retention deleted from the other growing tables, by table. */
  readonly rowsDeleted: Readonly<Record<RetainedTable, number>>;
  /** Everything before this was past retention. */
  readonly cutoff: string;
}

const DEFAULT_DELETE_BATCH = 10_000;

/**
 * The other tables that grow with time, and which of their rows are past retention at the cutoff
 * ($1): only rows whose story is over — a pending priority item, an open alert, stays.
 */
const RETAINED = {
  audit_log: 'occurred_at < $1',
  polling_priority_item: "status IN ('completed', 'failed') AND finished_at < $1",
  polling_failure_alert: "status = 'recovered' AND recovered_at < $1",
  carrier_alert: "status = 'resolved' AND resolved_at < $1",
  ingest_dead_letter: 'failed_at < $1',
  card_change: 'learned_at < $1',
} as const;
export type RetainedTable = keyof typeof RETAINED | 'carrier_event';

/** Deletes `table`'s rows matching `where` in batches (short transactions, short locks); returns how many. */
async function deleteInBatches(pool: Pool, table: string, where: string, cutoff: Date, batch: number): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await pool.query(`DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE ${where} LIMIT $2)`, [cutoff, batch]);
    total += deleted.rowCount ?? 0;
    if ((deleted.rowCount ?? 0) < batch) return total;
  }
}
const PARTITION_NAME = /^card_observation_(\d{4})(\d{2})$/;

const monthStart = (date: Date, offset = 0): Date => new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + offset, 1));
const partitionName = (month: Date): string => `card_observation_${month.getUTCFullYear()}${String(month.getUTCMonth() + 1).padStart(2, '0')}`;

async function partitionExists(pool: Pool, name: string): Promise<boolean> {
  const { rows } = await pool.query<{ exists: boolean }>('SELECT to_regclass($1) IS NOT NULL AS exists', [name]);
  return rows[0]?.exists === true;
}

/** Creates the month's partition; when the DEFAULT partition holds rows of it, moves them in. */
async function createMonth(pool: Pool, month: Date): Promise<number> {
  const next = monthStart(month, 1);
  const { rows } = await pool.query<{ n: string }>('SELECT count(*)::text AS n FROM card_observation_default WHERE observed_at >= $1 AND observed_at < $2', [
    month,
    next,
  ]);
  const waiting = Number(rows[0]?.n ?? 0);
  if (waiting === 0) {
    await pool.query('SELECT create_card_observation_partitions($1::date, 1)', [month]);
    return 0;
  }
  return withTransaction(pool, async (client) => {
    // Detaching the default locks the table for the move: inserts wait, none fails.
    await client.query('ALTER TABLE card_observation DETACH PARTITION card_observation_default');
    await client.query('SELECT create_card_observation_partitions($1::date, 1)', [month]);
    const moved = await client.query(
      'WITH gone AS (DELETE FROM card_observation_default WHERE observed_at >= $1 AND observed_at < $2 RETURNING *) ' +
        'INSERT INTO card_observation SELECT * FROM gone',
      [month, next],
    );
    await client.query('ALTER TABLE card_observation ATTACH PARTITION card_observation_default DEFAULT');
    return moved.rowCount ?? 0;
  });
}

export async function maintainStorage(pool: Pool, policy: RetentionPolicy, now: Date): Promise<MaintenanceResult> {
  const created: string[] = [];
  let moved = 0;
  for (let i = 0; i < policy.monthsAhead; i += 1) {
    const month = monthStart(now, i);
    const name = partitionName(month);
    if (await partitionExists(pool, name)) continue;
    moved += await createMonth(pool, month);
    created.push(name);
  }

  const cutoff = monthStart(now, 1 - policy.keepMonths);
  const { rows: partitions } = await pool.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'card_observation'::regclass`,
  );
  const dropped: string[] = [];
  for (const { name } of partitions) {
    const match = PARTITION_NAME.exec(name);
    if (!match) continue;
    const month = new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, 1));
    if (month.getTime() >= cutoff.getTime()) continue;
    await pool.query(`DROP TABLE ${name}`);
    dropped.push(name);
  }
  const defaultRows = await pool.query('DELETE FROM card_observation_default WHERE observed_at < $1', [cutoff]);

  const batch = policy.deleteBatch ?? DEFAULT_DELETE_BATCH;
  const executions = await deleteInBatches(pool, 'card_execution', 'started_at < $1', cutoff, batch);
  const rowsDeleted = {} as Record<RetainedTable, number>;
  for (const [table, where] of Object.entries(RETAINED) as [Exclude<RetainedTable, 'carrier_event'>, string][])
    rowsDeleted[table] = await deleteInBatches(pool, table, where, cutoff, batch);
  // Applied events on their own, shorter clock; a pending event stays until applied, however old.
  const eventCutoff = policy.eventDays === undefined ? cutoff : new Date(now.getTime() - policy.eventDays * 86_400_000);
  rowsDeleted.carrier_event = await deleteInBatches(pool, 'carrier_event', "status <> 'pending' AND received_at < $1", eventCutoff, batch);
  return {
    partitionsCreated: created,
    rowsMovedFromDefault: moved,
    partitionsDropped: dropped.sort(),
    defaultRowsDeleted: defaultRows.rowCount ?? 0,
    executionsDeleted: executions,
    rowsDeleted,
    cutoff: cutoff.toISOString(),
  };
}
