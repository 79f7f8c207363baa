/**
 * Failure alerts (one open per card and type, recovered on success) and account-level alerts
 * (more than N opened within W). Every write is idempotent under activity retries.
 */
import { isCheckType, type CheckType } from '../workflow-safe/checkTypes.js';
import { DomainError } from '../domain/errors.js';
import { requireId, requireInt, requireText } from '../domain/validate.js';
import { withTransaction, type Pool } from './pool.js';
import type { Queryable } from './queryable.js';

export interface FailureAlert {
  readonly id: string;
  readonly cardId: string;
  readonly carrierId: string;
  readonly type: CheckType;
  readonly status: 'open' | 'recovered';
  readonly failCount: number;
  readonly firstFailedAt?: Date;
  readonly lastError?: string;
  readonly openedAt: Date;
  readonly recoveredAt?: Date;
  readonly ackedAt?: Date;
  readonly ackedBy?: string;
}

export interface CarrierAlert {
  readonly id: string;
  readonly carrierId: string;
  readonly kind: 'failure_burst' | 'ingest_backlog';
  readonly status: 'open' | 'resolved';
  readonly alertCount: number;
  readonly threshold: number;
  readonly windowMs: number;
  readonly openedAt: Date;
}

export interface FailureAlertRow {
  id: string;
  card_id: string;
  carrier_id: string;
  check_type: CheckType;
  status: 'open' | 'recovered';
  fail_count: number;
  first_failed_at: Date | null;
  last_error: string | null;
  opened_at: Date;
  recovered_at: Date | null;
  acked_at: Date | null;
  acked_by: string | null;
}

export const FAILURE_COLUMNS = `id::text, card_id::text, carrier_id::text, check_type, status, fail_count, first_failed_at, last_error,
  opened_at, recovered_at, acked_at, acked_by`;

export function toFailureAlert(row: FailureAlertRow): FailureAlert {
  return {
    id: row.id,
    cardId: row.card_id,
    carrierId: row.carrier_id,
    type: row.check_type,
    status: row.status,
    failCount: row.fail_count,
    openedAt: row.opened_at,
    ...(row.first_failed_at === null ? {} : { firstFailedAt: row.first_failed_at }),
    ...(row.last_error === null ? {} : { lastError: row.last_error }),
    ...(row.recovered_at === null ? {} : { recoveredAt: row.recovered_at }),
    ...(row.acked_at === null ? {} : { ackedAt: row.acked_at }),
    ...(row.acked_by === null ? {} : { ackedBy: row.acked_by }),
  };
}

export interface FailureInput {
  readonly cardId: string;
  readonly carrierId: string;
  readonly type: CheckType;
  /** Consecutive failures including this one (`fail:t` after the increment). */
  readonly failCount: number;
  readonly firstFailedAt?: Date;
  readonly error: string;
  readonly now?: Date;
  /** Failures that open an alert; defaults to the account's failure_alert_threshold. */
  readonly threshold?: number;
  /** Account alert: more than `accountThreshold` opened within `accountWindowMs` (defaults: the account's). */
  readonly accountThreshold?: number;
  readonly accountWindowMs?: number;
  /**
   * Start of the failing execution. When set, a later execution of the card that succeeded for
   * the type (its card_execution row) means the card has recovered since: a late, older failure
   * record then opens nothing (out-of-order protection for asynchronous ingest).
   */
  readonly startedAt?: Date;
}

export interface FailureResult {
  /** True only for the call that opened the alert (a retry sees false). */
  readonly opened: boolean;
  readonly alert: FailureAlert | null;
  /** Set when this failure pushed the account over its window threshold (new or refreshed). */
  readonly accountAlert: CarrierAlert | null;
}

/**
 * Advisory-lock namespace of the per-(card, type) alert locks ('alrt'): the two-key form keeps
 * them apart from every single-key advisory lock (the migration lock).
 */
const ALERT_LOCK_CLASS = 0x616c7274;

/**
 * Serialises the alert writes of one (card, type) across concurrent transactions until they end.
 * Under READ COMMITTED a batch recovering a card's alert does not see the alert another batch is
 * inserting, and a late failure does not see the success another batch is committing: both then
 * miss each other and the alert stays open after the card recovered. Holding the lock from
 * before the first alert statement to the commit makes the second transaction's statements see
 * the first's rows. Locks are taken in one order (by key) in one statement, so two batches
 * sharing cards wait for each other instead of deadlocking.
 */
export async function lockFailureAlerts(db: Queryable, keys: readonly { cardId: string; type: CheckType }[]): Promise<void> {
  if (keys.length === 0) return;
  await db.query(
    `SELECT count(pg_advisory_xact_lock($1::integer, s.h)) FROM (
       SELECT DISTINCT hashtext(k) AS h FROM unnest($2::text[]) AS u(k) ORDER BY h
     ) AS s`,
    [ALERT_LOCK_CLASS, keys.map((key) => `${key.cardId}:${key.type}`)],
  );
}

/**
 * Records a failure: below the threshold nothing is written; at or above it the open alert for
 * (card, type) is created or refreshed (partial unique index + ON CONFLICT make retries land on
 * the same row), and on a fresh open the account's window count is evaluated.
 */
export async function recordFailure(pool: Pool, input: FailureInput): Promise<FailureResult> {
  validateFailure(input);
  return withTransaction(pool, async (client) => {
    await lockFailureAlerts(client, [input]);
    return recordFailureIn(client, input);
  });
}

function validateFailure(input: FailureInput): void {
  requireId(input.cardId, 'cardId');
  requireId(input.carrierId, 'carrierId');
  if (!isCheckType(input.type)) throw DomainError.invalid('type', 'type is not a check type');
  requireInt(input.failCount, 'failCount', 1, Number.MAX_SAFE_INTEGER);
}

/** {@link recordFailure} inside the caller's transaction (an ingest batch), which holds {@link lockFailureAlerts}. */
export async function recordFailureIn(client: Queryable, input: FailureInput): Promise<FailureResult> {
  validateFailure(input);
  const now = input.now ?? new Date();
  const { rows: limits } = await client.query<{ failure_alert_threshold: number; account_alert_threshold: number; account_alert_window_ms: number }>(
    'SELECT failure_alert_threshold, account_alert_threshold, account_alert_window_ms FROM carrier_account WHERE id = $1::bigint',
    [input.carrierId],
  );
  const account = limits[0];
  if (!account) throw DomainError.notFound('carrierId', `carrier account ${input.carrierId} does not exist`);
  const threshold = input.threshold ?? account.failure_alert_threshold;
  if (input.failCount < threshold) return { opened: false, alert: null, accountAlert: null };
  if (input.startedAt && (await succeededSince(client, input.cardId, input.type, input.startedAt))) return { opened: false, alert: null, accountAlert: null };
  const { rows } = await client.query<FailureAlertRow & { inserted: boolean }>(
    `INSERT INTO polling_failure_alert (card_id, carrier_id, check_type, fail_count, first_failed_at, last_error, opened_at)
     VALUES ($1::bigint, $2::bigint, $3, $4, $5, $6, $7)
     ON CONFLICT (card_id, check_type) WHERE status = 'open'
     DO UPDATE SET fail_count = GREATEST(polling_failure_alert.fail_count, excluded.fail_count), last_error = excluded.last_error
     RETURNING ${FAILURE_COLUMNS}, (xmax = 0) AS inserted`,
    [input.cardId, input.carrierId, input.type, input.failCount, input.firstFailedAt ?? null, input.error.slice(0, 1000), now],
  );
  const row = rows[0]!;
  const accountAlert = row.inserted
    ? await evaluateAccountAlert(client, {
        carrierId: input.carrierId,
        now,
        threshold: input.accountThreshold ?? account.account_alert_threshold,
        windowMs: input.accountWindowMs ?? account.account_alert_window_ms,
      })
    : null;
  return { opened: row.inserted, alert: toFailureAlert(row), accountAlert };
}

/** Whether an execution of the card started after `since` succeeded for the type. */
async function succeededSince(db: Queryable, cardId: string, type: CheckType, since: Date): Promise<boolean> {
  const { rows } = await db.query<{ found: boolean }>(
    `SELECT EXISTS (
       SELECT 1 FROM card_execution
        WHERE card_id = $1::bigint AND started_at > $2 AND details -> 'steps' @> jsonb_build_array(jsonb_build_object('type', $3::text, 'outcome', 'success'))
     ) AS found`,
    [cardId, since, type],
  );
  return rows[0]?.found ?? false;
}

/**
 * Recovers the open failure alerts of the given (card, type) successes. A success with `at`
 * recovers only an alert opened at or before it, so a late, older success cannot recover an alert
 * that newer failures opened. An account whose failure_burst alert is open has it resolved once
 * its open failure alerts are back at or below the alert's threshold: the burst has recovered.
 * One statement (a snapshot sees the alerts as they were before it, hence the subtraction).
 * Returns how many failure alerts recovered.
 */
export async function recoverFailures(db: Queryable, successes: readonly { cardId: string; type: CheckType; at?: Date }[], now = new Date()): Promise<number> {
  if (successes.length === 0) return 0;
  const { rows } = await db.query<{ recovered: number }>(
    `WITH recovered AS (
       UPDATE polling_failure_alert a SET status = 'recovered', recovered_at = GREATEST(s.at, a.opened_at)
         FROM (SELECT DISTINCT ON (card_id, check_type) card_id, check_type, at
                 FROM unnest($1::bigint[], $2::text[], $3::timestamptz[]) AS u(card_id, check_type, at)
                ORDER BY card_id, check_type, at DESC) AS s
        WHERE a.card_id = s.card_id AND a.check_type = s.check_type AND a.status = 'open' AND a.opened_at <= s.at
        RETURNING a.carrier_id, a.recovered_at
     ), per_account AS (
       SELECT carrier_id, count(*) AS n, max(recovered_at) AS at FROM recovered GROUP BY carrier_id
     ), burst_over AS (
       UPDATE carrier_alert c SET status = 'resolved', resolved_at = GREATEST(p.at, c.opened_at), updated_at = GREATEST(p.at, c.opened_at)
         FROM per_account p
        WHERE c.carrier_id = p.carrier_id AND c.kind = 'failure_burst' AND c.status = 'open'
          AND (SELECT count(*) FROM polling_failure_alert f WHERE f.carrier_id = c.carrier_id AND f.status = 'open') - p.n <= c.threshold
        RETURNING c.id
     )
     SELECT (SELECT count(*) FROM recovered)::int AS recovered, (SELECT count(*) FROM burst_over)::int AS resolved`,
    [successes.map((s) => s.cardId), successes.map((s) => s.type), successes.map((s) => s.at ?? now)],
  );
  return rows[0]?.recovered ?? 0;
}

interface CarrierAlertRow {
  id: string;
  carrier_id: string;
  kind: CarrierAlert['kind'];
  status: CarrierAlert['status'];
  alert_count: number;
  threshold: number;
  window_ms: number;
  opened_at: Date;
}

const toCarrierAlert = (row: CarrierAlertRow): CarrierAlert => ({
  id: row.id,
  carrierId: row.carrier_id,
  kind: row.kind,
  status: row.status,
  alertCount: row.alert_count,
  threshold: row.threshold,
  windowMs: row.window_ms,
  openedAt: row.opened_at,
});

/**
 * Counts failure alerts opened on the account within (now − window, now]; when more than
 * `threshold`, opens the account's failure_burst alert or refreshes the open one.
 */
export async function evaluateAccountAlert(
  db: Queryable,
  input: { carrierId: string; now?: Date; threshold: number; windowMs: number },
): Promise<CarrierAlert | null> {
  requireInt(input.threshold, 'accountThreshold', 1, 1_000_000);
  requireInt(input.windowMs, 'accountWindowMs', 1, 604_800_000);
  const now = input.now ?? new Date();
  const { rows } = await db.query<CarrierAlertRow>(
    `WITH n AS (
       SELECT count(*)::int AS c FROM polling_failure_alert
        WHERE carrier_id = $1::bigint AND opened_at > $2::timestamptz - make_interval(secs => $3::double precision / 1000) AND opened_at <= $2
     )
     INSERT INTO carrier_alert (carrier_id, kind, alert_count, threshold, window_ms, opened_at, updated_at)
     SELECT $1::bigint, 'failure_burst', n.c, $4, $3, $2, $2 FROM n WHERE n.c > $4
     ON CONFLICT (carrier_id, kind) WHERE status = 'open'
     DO UPDATE SET alert_count = GREATEST(carrier_alert.alert_count, excluded.alert_count), updated_at = excluded.updated_at
     RETURNING id::text, carrier_id::text, kind, status, alert_count, threshold, window_ms, opened_at`,
    [input.carrierId, now, input.windowMs, input.threshold],
  );
  return rows[0] ? toCarrierAlert(rows[0]) : null;
}

export interface IngestBacklogAlertInput {
  /** Records waiting when the backlog went over the threshold, and the thresholds. */
  readonly records: number;
  readonly threshold: number;
  readonly maxAgeMs: number;
  readonly openedAt: Date;
}

/**
 * Opens the ingest_backlog alert on every enabled account (claiming is tightened for all of them)
 * or refreshes the open one; idempotent. Returns how many accounts have it open now.
 */
export async function openIngestBacklogAlerts(db: Queryable, input: IngestBacklogAlertInput): Promise<number> {
  const result = await db.query(
    `INSERT INTO carrier_alert (carrier_id, kind, alert_count, threshold, window_ms, opened_at, updated_at)
     SELECT id, 'ingest_backlog', $1, $2, $3, $4, $4 FROM carrier_account WHERE enabled
     ON CONFLICT (carrier_id, kind) WHERE status = 'open'
     DO UPDATE SET alert_count = GREATEST(carrier_alert.alert_count, excluded.alert_count), updated_at = now()`,
    [Math.max(0, Math.round(input.records)), Math.max(1, Math.round(input.threshold)), Math.max(1, Math.round(input.maxAgeMs)), input.openedAt],
  );
  return result.rowCount ?? 0;
}

/** Resolves every open ingest_backlog alert (the backlog drained). Returns how many were open. */
export async function resolveIngestBacklogAlerts(db: Queryable, at = new Date()): Promise<number> {
  const result = await db.query(
    `UPDATE carrier_alert SET status = 'resolved', resolved_at = GREATEST($1, opened_at), updated_at = now()
      WHERE kind = 'ingest_backlog' AND status = 'open'`,
    [at],
  );
  return result.rowCount ?? 0;
}

export async function listFailureAlerts(
  db: Queryable,
  filter: { cardId?: string; carrierId?: string; openOnly?: boolean } = {},
  limit = 100,
): Promise<FailureAlert[]> {
  const { rows } = await db.query<FailureAlertRow>(
    `SELECT ${FAILURE_COLUMNS} FROM polling_failure_alert
      WHERE ($1::bigint IS NULL OR card_id = $1) AND ($2::bigint IS NULL OR carrier_id = $2) AND ($3::boolean IS NOT TRUE OR status = 'open')
      ORDER BY opened_at DESC, polling_failure_alert.id DESC LIMIT $4`,
    [filter.cardId ?? null, filter.carrierId ?? null, filter.openOnly ?? false, limit],
  );
  return rows.map(toFailureAlert);
}

/** Acknowledges a failure alert (idempotent: the first ack's time and actor are kept). */
export async function ackFailureAlert(db: Queryable, id: string, actor: string, now = new Date()): Promise<FailureAlert> {
  const { rows } = await db.query<FailureAlertRow>(
    `UPDATE polling_failure_alert SET acked_at = coalesce(acked_at, $2), acked_by = coalesce(acked_by, $3)
      WHERE id = $1::bigint RETURNING ${FAILURE_COLUMNS}`,
    [requireId(id, 'id'), now, requireText(actor, 'actor')],
  );
  if (!rows[0]) throw DomainError.notFound('id', `alert ${id} does not exist`);
  return toFailureAlert(rows[0]);
}
