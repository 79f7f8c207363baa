/**
 * Read-only queries behind the operations API: account status figures and keyset
 * pages of alerts. Kept apart from the repositories the orchestration writes through.
 */
import type { CardStatus } from '../domain/card.js';
import { SCOPE_JOINS } from './cards.js';
import type { Queryable } from './queryable.js';
import { FAILURE_COLUMNS, toFailureAlert, type FailureAlert, type FailureAlertRow } from './alerts.js';

export interface LatenessPercentiles {
  readonly p50: number;
  readonly p99: number;
}

/** Lateness (start − earliest due) of the account's executions started within the last `windowMs`. */
export async function latenessPercentiles(db: Queryable, carrierId: string, windowMs: number): Promise<LatenessPercentiles> {
  const { rows } = await db.query<{ p50: number | null; p99: number | null }>(
    `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY l) AS p50, percentile_cont(0.99) WITHIN GROUP (ORDER BY l) AS p99
       FROM (SELECT (details->>'latenessMs')::double precision AS l FROM card_execution
              WHERE carrier_id = $1::bigint AND started_at > now() - make_interval(secs => $2::double precision / 1000)
                AND details ? 'latenessMs') s`,
    [carrierId, windowMs],
  );
  const row = rows[0];
  return { p50: Math.round(row?.p50 ?? 0), p99: Math.round(row?.p99 ?? 0) };
}

/** Polled cards of an account per status: the input of the capacity estimate. */
export async function polledCountsByStatus(db: Queryable, carrierId: string): Promise<{ status: CardStatus; count: number }[]> {
  const { rows } = await db.query<{ status: CardStatus; count: string }>(
    `SELECT c.status, count(*)::text AS count FROM iot_card c ${SCOPE_JOINS}
      WHERE c.carrier_id = $1::bigint AND c.enable_polling AND (c.is_standalone OR coalesce(d.enable_polling, true))
      GROUP BY c.status`,
    [carrierId],
  );
  return rows.map((row) => ({ status: row.status, count: Number(row.count) }));
}

export interface AlertFilter {
  readonly carrierId?: string;
  readonly cardId?: string;
  readonly openOnly: boolean;
}

/** A failure alert as the repository maps it, tagged for the mixed alert list. */
export type FailureAlertItem = FailureAlert & { readonly kind: 'failure' };

export interface AccountAlertItem {
  readonly kind: 'account';
  readonly id: string;
  readonly carrierId: string;
  readonly alertKind: string;
  readonly status: string;
  readonly alertCount: number;
  readonly threshold: number;
  readonly windowMs: number;
  readonly openedAt: Date;
  readonly resolvedAt?: Date;
  readonly ackedAt?: Date;
  readonly ackedBy?: string;
}

const optional = <K extends string, V>(key: K, value: V | null): Partial<Record<K, V>> => (value === null ? {} : ({ [key]: value } as Record<K, V>));

/** Failure alerts newest first (id descending), those with id < `beforeId`. */
export async function pageFailureAlerts(db: Queryable, filter: AlertFilter, beforeId: string | undefined, limit: number): Promise<FailureAlertItem[]> {
  const { rows } = await db.query<FailureAlertRow>(
    `SELECT ${FAILURE_COLUMNS} FROM polling_failure_alert
      WHERE ($1::bigint IS NULL OR id < $1) AND ($2::bigint IS NULL OR carrier_id = $2) AND ($3::bigint IS NULL OR card_id = $3)
        AND ($4::boolean IS NOT TRUE OR status = 'open')
      ORDER BY id DESC LIMIT $5`,
    [beforeId ?? null, filter.carrierId ?? null, filter.cardId ?? null, filter.openOnly, limit],
  );
  return rows.map((row) => ({ kind: 'failure', ...toFailureAlert(row) }));
}

/** Account alerts newest first (id descending), those with id < `beforeId`. */
export async function pageAccountAlerts(
  db: Queryable,
  filter: Omit<AlertFilter, 'cardId'>,
  beforeId: string | undefined,
  limit: number,
): Promise<AccountAlertItem[]> {
  const { rows } = await db.query<{
    id: string;
    carrier_id: string;
    kind: string;
    status: string;
    alert_count: number;
    threshold: number;
    window_ms: number;
    opened_at: Date;
    resolved_at: Date | null;
    acked_at: Date | null;
    acked_by: string | null;
  }>(
    `SELECT id::text, carrier_id::text, kind, status, alert_count, threshold, window_ms, opened_at, resolved_at, acked_at, acked_by
       FROM carrier_alert
      WHERE ($1::bigint IS NULL OR id < $1) AND ($2::bigint IS NULL OR carrier_id = $2) AND ($3::boolean IS NOT TRUE OR status = 'open')
      ORDER BY id DESC LIMIT $4`,
    [beforeId ?? null, filter.carrierId ?? null, filter.openOnly, limit],
  );
  return rows.map((row) => ({
    kind: 'account',
    id: row.id,
    carrierId: row.carrier_id,
    alertKind: row.kind,
    status: row.status,
    alertCount: row.alert_count,
    threshold: row.threshold,
    windowMs: row.window_ms,
    openedAt: row.opened_at,
    ...optional('resolvedAt', row.resolved_at),
    ...optional('ackedAt', row.acked_at),
    ...optional('ackedBy', row.acked_by),
  }));
}

/**
 * Acknowledges an account alert (idempotent: the first ack's time and actor are kept). The one
 * write in this module; db/alerts.ts only has the failure-alert ack. Returns false for an unknown id.
 */
export async function ackAccountAlert(db: Queryable, id: string, actor: string, now = new Date()): Promise<boolean> {
  const result = await db.query('UPDATE carrier_alert SET acked_at = coalesce(acked_at, $2), acked_by = coalesce(acked_by, $3) WHERE id = $1::bigint', [
    id,
    now,
    actor,
  ]);
  return (result.rowCount ?? 0) > 0;
}
