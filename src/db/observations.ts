/**
 * Observation inserts (sync mode and ingest batches) with out-of-order protection:
 * a duplicate collection id is ignored, and a card's latest values only move forward in time.
 */
import { isCheckType, type CheckType } from '../workflow-safe/checkTypes.js';
import { DomainError } from '../domain/errors.js';
import { requireId, requireText } from '../domain/validate.js';
import type { Queryable } from './queryable.js';

/**
 * One card_observation row to insert (from a step's StepObservation, src/ingest/rows.ts).
 * Payload fields copied onto the card: `card_status` → `network` (string), `realname` →
 * `realname` (string), `carddata` → `usageKb` (number). Other fields are kept in the row only.
 */
export interface ObservationRow {
  readonly observationId: string;
  readonly cardId: string;
  readonly carrierId: string;
  readonly type: CheckType;
  readonly observedAt: Date;
  readonly payload: Readonly<Record<string, unknown>>;
}

export interface InsertObservationsResult {
  /** Rows newly stored (duplicates of an existing collection id excluded). */
  readonly inserted: number;
  /** Cards whose latest values were updated. */
  readonly cardsUpdated: number;
}

function validate(observation: ObservationRow, index: number): void {
  const at = `observations[${index}]`;
  requireText(observation.observationId, `${at}.observationId`);
  requireId(observation.cardId, `${at}.cardId`);
  requireId(observation.carrierId, `${at}.carrierId`);
  if (!isCheckType(observation.type)) throw DomainError.invalid(`${at}.type`, `${at}.type is not a check type`);
  if (!(observation.observedAt instanceof Date) || Number.isNaN(observation.observedAt.getTime())) {
    throw DomainError.invalid(`${at}.observedAt`, `${at}.observedAt must be a valid date`);
  }
}

/**
 * One statement: insert the batch (ON CONFLICT DO NOTHING on (observation_id, observed_at)), then
 * from the rows actually inserted take each card's newest value per type and apply it only where
 * it is newer than what the card holds.
 */
export async function insertObservations(db: Queryable, observations: readonly ObservationRow[]): Promise<InsertObservationsResult> {
  if (observations.length === 0) return { inserted: 0, cardsUpdated: 0 };
  observations.forEach(validate);
  const { rows } = await db.query<{ inserted: number; cards_updated: number }>(
    `WITH ins AS (
       INSERT INTO card_observation (observation_id, observed_at, card_id, carrier_id, check_type, payload)
       SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::bigint[], $5::text[], $6::jsonb[])
       ON CONFLICT (observation_id, observed_at) DO NOTHING
       RETURNING card_id, check_type, observed_at, payload
     ), newest AS (
       SELECT DISTINCT ON (card_id, check_type) card_id, check_type, observed_at, payload
         FROM ins ORDER BY card_id, check_type, observed_at DESC
     ), per_card AS (
       SELECT card_id,
              max(observed_at) FILTER (WHERE check_type = 'card_status' AND payload ? 'network') AS net_at,
              max(payload ->> 'network') FILTER (WHERE check_type = 'card_status') AS net,
              max(observed_at) FILTER (WHERE check_type = 'realname' AND payload ? 'realname') AS rn_at,
              max(payload ->> 'realname') FILTER (WHERE check_type = 'realname') AS rn,
              max(observed_at) FILTER (WHERE check_type = 'carddata' AND jsonb_typeof(payload -> 'usageKb') = 'number') AS data_at,
              max((payload ->> 'usageKb')::numeric) FILTER (WHERE check_type = 'carddata' AND jsonb_typeof(payload -> 'usageKb') = 'number') AS data_kb
         FROM newest GROUP BY card_id
     ), upd AS (
       UPDATE iot_card c SET
         network_status = CASE WHEN p.net_at > coalesce(c.network_observed_at, '-infinity') THEN p.net ELSE c.network_status END,
         network_observed_at = CASE WHEN p.net_at > coalesce(c.network_observed_at, '-infinity') THEN p.net_at ELSE c.network_observed_at END,
         realname_status = CASE WHEN p.rn_at > coalesce(c.realname_observed_at, '-infinity') THEN p.rn ELSE c.realname_status END,
         realname_observed_at = CASE WHEN p.rn_at > coalesce(c.realname_observed_at, '-infinity') THEN p.rn_at ELSE c.realname_observed_at END,
         data_usage_kb = CASE WHEN p.data_at > coalesce(c.data_observed_at, '-infinity') THEN round(p.data_kb)::bigint ELSE c.data_usage_kb END,
         data_observed_at = CASE WHEN p.data_at > coalesce(c.data_observed_at, '-infinity') THEN p.data_at ELSE c.data_observed_at END
         FROM per_card p
        WHERE c.id = p.card_id
          AND (p.net_at > coalesce(c.network_observed_at, '-infinity')
            OR p.rn_at > coalesce(c.realname_observed_at, '-infinity')
            OR p.data_at > coalesce(c.data_observed_at, '-infinity'))
       RETURNING c.id
     )
     SELECT (SELECT count(*) FROM ins)::int AS inserted, (SELECT count(*) FROM upd)::int AS cards_updated`,
    [
      observations.map((o) => o.observationId),
      observations.map((o) => o.observedAt),
      observations.map((o) => o.cardId),
      observations.map((o) => o.carrierId),
      observations.map((o) => o.type),
      observations.map((o) => JSON.stringify(o.payload)),
    ],
  );
  return { inserted: rows[0]!.inserted, cardsUpdated: rows[0]!.cards_updated };
}
