/**
 * What the tests read back from PostgreSQL that the product itself never reads (it writes these
 * rows for other consumers, or for people): a card's latest observed values, its observations,
 * an entity's audit trail, the ingest's dead letters.
 */
import type { Queryable } from '../src/db/queryable.js';
import type { AuditEntity, AuditInput } from '../src/db/audit.js';
import type { ObservationRow } from '../src/db/observations.js';
import type { DeadLetter } from '../src/ingest/deadLetters.js';
import { DomainError } from '../src/domain/errors.js';
import { requireId } from '../src/domain/validate.js';

/** Latest observed values kept on the card (out-of-order protected). */
export interface CardLatest {
  readonly networkStatus?: string;
  readonly networkObservedAt?: Date;
  readonly realnameStatus?: string;
  readonly realnameObservedAt?: Date;
  readonly dataUsageKb?: number;
  readonly dataObservedAt?: Date;
}

interface LatestRow {
  network_status: string | null;
  network_observed_at: Date | null;
  realname_status: string | null;
  realname_observed_at: Date | null;
  data_usage_kb: string | null;
  data_observed_at: Date | null;
}

/** The card's latest observed values, as the observation writes keep them on iot_card. */
export async function getCardLatest(db: Queryable, cardId: string): Promise<CardLatest> {
  const { rows } = await db.query<LatestRow>(
    `SELECT network_status, network_observed_at, realname_status, realname_observed_at, data_usage_kb, data_observed_at
       FROM iot_card WHERE id = $1::bigint`,
    [requireId(cardId, 'cardId')],
  );
  const row = rows[0];
  if (!row) throw DomainError.notFound('cardId', `card ${cardId} does not exist`);
  return {
    ...(row.network_status === null ? {} : { networkStatus: row.network_status }),
    ...(row.network_observed_at === null ? {} : { networkObservedAt: row.network_observed_at }),
    ...(row.realname_status === null ? {} : { realnameStatus: row.realname_status }),
    ...(row.realname_observed_at === null ? {} : { realnameObservedAt: row.realname_observed_at }),
    ...(row.data_usage_kb === null ? {} : { dataUsageKb: Number(row.data_usage_kb) }),
    ...(row.data_observed_at === null ? {} : { dataObservedAt: row.data_observed_at }),
  };
}

/** A card_observation row as read back. */
export interface StoredObservation extends ObservationRow {
  readonly insertedAt: Date;
}

/** A card's observations, newest first. */
export async function listCardObservations(db: Queryable, cardId: string, limit = 50): Promise<StoredObservation[]> {
  const { rows } = await db.query<StoredObservation>(
    `SELECT observation_id AS "observationId", card_id::text AS "cardId", carrier_id::text AS "carrierId", check_type AS "type",
            observed_at AS "observedAt", payload, inserted_at AS "insertedAt"
       FROM card_observation WHERE card_id = $1::bigint ORDER BY observed_at DESC LIMIT $2`,
    [requireId(cardId, 'cardId'), limit],
  );
  return rows;
}

/** An audit_log row as read back. */
export interface AuditRecord extends Required<Omit<AuditInput, 'reason'>> {
  readonly id: string;
  readonly reason?: string;
}

/** One entity's audit trail, oldest first. */
export async function listAudit(db: Queryable, entityType: AuditEntity, entityId: string): Promise<AuditRecord[]> {
  const { rows } = await db.query<Omit<AuditRecord, 'reason'> & { reason: string | null }>(
    `SELECT id::text, entity_type AS "entityType", entity_id AS "entityId", action, actor, source, reason, before, after, occurred_at AS "occurredAt"
       FROM audit_log WHERE entity_type = $1 AND entity_id = $2 ORDER BY audit_log.id`,
    [entityType, entityId],
  );
  return rows.map(({ reason, ...row }) => (reason === null ? row : { ...row, reason }));
}

/** An ingest_dead_letter row as read back. */
export interface StoredDeadLetter extends DeadLetter {
  readonly id: string;
  readonly failedAt: Date;
}

/** The dead letters, newest first. */
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
