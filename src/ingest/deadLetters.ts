/**
 * ingest_dead_letter: records the ingest could never write, with the reason, so nothing is
 * dropped silently. Idempotent per record id: a batch redelivered after its dead letter was
 * written adds no second row.
 */
import type { Queryable } from '../db/queryable.js';

export interface DeadLetter {
  readonly recordId: string;
  readonly cardId?: string;
  readonly carrierId?: string;
  /** The record as received (parsed JSON, or the raw text when it did not parse). */
  readonly record: unknown;
  readonly reason: string;
  readonly errorCode?: string;
}

export interface StoredDeadLetter extends DeadLetter {
  readonly id: string;
  readonly failedAt: Date;
}

const numericId = (value: string | undefined): string | null => (value !== undefined && /^[1-9][0-9]{0,18}$/.test(value) ? value : null);

export async function insertDeadLetter(db: Queryable, letter: DeadLetter): Promise<boolean> {
  const result = await db.query(
    `INSERT INTO ingest_dead_letter (record_id, card_id, carrier_id, record, reason, error_code)
     VALUES ($1, $2::bigint, $3::bigint, $4::jsonb, $5, $6)
     ON CONFLICT (record_id) DO NOTHING`,
    [
      letter.recordId.slice(0, 300),
      numericId(letter.cardId),
      numericId(letter.carrierId),
      JSON.stringify(letter.record ?? null),
      letter.reason.slice(0, 2000),
      letter.errorCode ?? null,
    ],
  );
  return (result.rowCount ?? 0) > 0;
}

export async function listDeadLetters(db: Queryable, limit = 100): Promise<StoredDeadLetter[]> {
  const { rows } = await db.query<{
    id: string;
    record_id: string;
    card_id: string | null;
    carrier_id: string | null;
    record: unknown;
    reason: string;
    error_code: string | null;
    failed_at: Date;
  }>(
    `SELECT id::text, record_id, card_id::text, carrier_id::text, record, reason, error_code, failed_at
       FROM ingest_dead_letter ORDER BY failed_at DESC, id DESC LIMIT $1`,
    [limit],
  );
  return rows.map((row) => ({
    id: row.id,
    recordId: row.record_id,
    ...(row.card_id === null ? {} : { cardId: row.card_id }),
    ...(row.carrier_id === null ? {} : { carrierId: row.carrier_id }),
    record: row.record,
    reason: row.reason,
    ...(row.error_code === null ? {} : { errorCode: row.error_code }),
    failedAt: row.failed_at,
  }));
}
