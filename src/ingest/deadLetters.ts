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
