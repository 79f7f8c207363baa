/**
 * The rows of the lifecycle outbox (migration 000012): written in the lifecycle change's own
 * transaction, claimed by the relay with a lease, deleted once applied, pushed back with a
 * growing delay when applying failed.
 */
import type { Queryable } from '../db/queryable.js';

/** One (card, account) pair whose Redis keys must follow PostgreSQL. */
export interface OutboxRef {
  readonly cardId: string;
  readonly carrierId: string;
}

export interface OutboxRow extends OutboxRef {
  readonly id: string;
  /** Attempts so far, this one included. */
  readonly attempts: number;
}

/**
 * Inserts one row per pair (one statement whatever their number); the relay leaves them alone for
 * `graceMs`, the time the writer normally needs to apply them itself. Returns the row ids.
 */
export async function insertOutboxRows(db: Queryable, refs: readonly OutboxRef[], graceMs: number): Promise<string[]> {
  if (refs.length === 0) return [];
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO lifecycle_outbox (card_id, carrier_id, next_attempt_at)
     SELECT x.card_id, x.carrier_id, now() + $3::double precision * interval '1 millisecond'
       FROM unnest($1::bigint[], $2::bigint[]) AS x(card_id, carrier_id)
     RETURNING id::text`,
    [refs.map((ref) => ref.cardId), refs.map((ref) => ref.carrierId), graceMs],
  );
  return rows.map((row) => row.id);
}

export async function deleteOutboxRows(db: Queryable, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await db.query('DELETE FROM lifecycle_outbox WHERE id = ANY($1::bigint[])', [ids]);
}

/**
 * Takes up to `limit` due rows, lowest card first, and pushes them `leaseMs` ahead so no other
 * relay takes them meanwhile (SKIP LOCKED: relays in several processes share the rows). A relay
 * that dies holding rows only delays them by the lease.
 */
export async function claimOutboxRows(db: Queryable, limit: number, leaseMs: number): Promise<OutboxRow[]> {
  const { rows } = await db.query<{ id: string; card_id: string; carrier_id: string; attempts: number }>(
    `WITH picked AS (
       SELECT id FROM lifecycle_outbox WHERE next_attempt_at <= now()
        ORDER BY card_id, id LIMIT $1 FOR UPDATE SKIP LOCKED
     )
     UPDATE lifecycle_outbox o
        SET next_attempt_at = now() + $2::double precision * interval '1 millisecond', attempts = o.attempts + 1
       FROM picked WHERE o.id = picked.id
     RETURNING o.id::text, o.card_id::text, o.carrier_id::text, o.attempts`,
    [limit, leaseMs],
  );
  return rows.map((row) => ({ id: row.id, cardId: row.card_id, carrierId: row.carrier_id, attempts: row.attempts }));
}

/** Applying failed: the rows wait `delayMs` (per row: their backoff) before the next attempt. */
export async function postponeOutboxRows(db: Queryable, rows: readonly { id: string; delayMs: number }[], error: string): Promise<void> {
  if (rows.length === 0) return;
  await db.query(
    `UPDATE lifecycle_outbox o SET next_attempt_at = now() + x.delay_ms * interval '1 millisecond', last_error = $3
       FROM unnest($1::bigint[], $2::double precision[]) AS x(id, delay_ms) WHERE o.id = x.id`,
    [rows.map((row) => row.id), rows.map((row) => row.delayMs), error.slice(0, 1000)],
  );
}

/** Of the given cards, those with rows still waiting (the relay's to apply, not the reconcile's). */
export async function cardsWithPendingRows(db: Queryable, cardIds: readonly string[]): Promise<Set<string>> {
  if (cardIds.length === 0) return new Set();
  const { rows } = await db.query<{ card_id: string }>('SELECT DISTINCT card_id::text FROM lifecycle_outbox WHERE card_id = ANY($1::bigint[])', [cardIds]);
  return new Set(rows.map((row) => row.card_id));
}

/** Rows waiting and the age of the oldest (seconds; 0 when none): the relay's backlog. */
export async function outboxBacklog(db: Queryable): Promise<{ pending: number; oldestSec: number }> {
  const { rows } = await db.query<{ pending: number; oldest_sec: number | null }>(
    'SELECT count(*)::int AS pending, extract(epoch FROM now() - min(created_at))::float8 AS oldest_sec FROM lifecycle_outbox',
  );
  return { pending: rows[0]?.pending ?? 0, oldestSec: rows[0]?.oldest_sec ?? 0 };
}
