/**
 * card_change: changes of a card's state as the carrier dated them, and when the product first
 * learned each (docs/design.md, 'Freshness'). Staleness = learned − changed.
 */
import type { CheckType } from '../workflow-safe/checkTypes.js';
import type { Queryable } from './queryable.js';

/** An observation that carried the carrier's date of the state it shows. */
export interface ChangeRow {
  readonly cardId: string;
  readonly carrierId: string;
  readonly type: CheckType;
  readonly changedAt: Date;
  /** When the observation was made: the product knew the state from then on. */
  readonly learnedAt: Date;
}

/** A change learned for the first time by a write: its staleness (learned − changed). */
export interface LearnedChange {
  readonly carrierId: string;
  readonly type: CheckType;
  readonly stalenessMs: number;
}

/**
 * Records the changes these observations carry; returns those learned for the first time (a change
 * already recorded that an older observation moves earlier is not returned again).
 * A change counts only when it came after the card's latest observation of its type before this
 * write (the card's columns, read before this write's observations update them): an older one was
 * already carried by that observation, and a card seen for the first time has no change to learn,
 * only a state. A change already recorded keeps the earliest observation that carried it (a
 * retried record, or an older observation arriving late in async ingest).
 */
export async function insertChanges(db: Queryable, rows: readonly ChangeRow[]): Promise<LearnedChange[]> {
  if (rows.length === 0) return [];
  const { rows: learned } = await db.query<{ carrier_id: string; check_type: CheckType; ms: number }>(
    `INSERT INTO card_change (card_id, carrier_id, check_type, changed_at, learned_at)
     SELECT o.card_id, o.carrier_id, o.check_type, o.changed_at, min(o.learned_at)
       FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::timestamptz[], $5::timestamptz[])
              AS o(card_id, carrier_id, check_type, changed_at, learned_at)
       JOIN iot_card c ON c.id = o.card_id
      WHERE o.changed_at <= o.learned_at
        AND (o.changed_at > CASE o.check_type
               WHEN 'card_status' THEN c.network_observed_at
               WHEN 'realname' THEN c.realname_observed_at
               WHEN 'carddata' THEN c.data_observed_at
             END
             OR EXISTS (SELECT 1 FROM card_change k WHERE k.card_id = o.card_id AND k.check_type = o.check_type AND k.changed_at = o.changed_at))
      GROUP BY o.card_id, o.carrier_id, o.check_type, o.changed_at
     ON CONFLICT (card_id, check_type, changed_at) DO UPDATE SET learned_at = EXCLUDED.learned_at
      WHERE card_change.learned_at > EXCLUDED.learned_at
     RETURNING carrier_id::text, check_type, extract(epoch FROM learned_at - changed_at) * 1000 AS ms, (xmax = 0) AS inserted`,
    [rows.map((r) => r.cardId), rows.map((r) => r.carrierId), rows.map((r) => r.type), rows.map((r) => r.changedAt), rows.map((r) => r.learnedAt)],
  );
  return learned
    .filter((row) => (row as { inserted?: boolean }).inserted === true)
    .map((row) => ({ carrierId: row.carrier_id, type: row.check_type, stalenessMs: Number(row.ms) }));
}

export interface Staleness {
  /** Changes learned in the window. */
  readonly changes: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** Per check type, the staleness of the account's changes learned in the last `windowMs`. */
export async function stalenessByType(db: Queryable, carrierId: string, windowMs: number): Promise<Partial<Record<CheckType, Staleness>>> {
  const { rows } = await db.query<{ check_type: CheckType; changes: number; p50: number; p99: number; max: number }>(
    `SELECT check_type, count(*)::int AS changes,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50,
            percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99,
            max(ms) AS max
       FROM (SELECT check_type, extract(epoch FROM learned_at - changed_at) * 1000 AS ms
               FROM card_change WHERE carrier_id = $1 AND learned_at > now() - make_interval(secs => $2::double precision / 1000)) s
      GROUP BY check_type`,
    [carrierId, windowMs],
  );
  return Object.fromEntries(
    rows.map((r) => [
      r.check_type,
      { changes: r.changes, p50Ms: Math.round(Number(r.p50)), p99Ms: Math.round(Number(r.p99)), maxMs: Math.round(Number(r.max)) },
    ]),
  );
}
