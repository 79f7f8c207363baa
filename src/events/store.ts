/**
 * carrier_event rows (migrations/000015): stored by POST /v1/events before it answers, applied
 * once by the event applier (src/events/applier.ts).
 */
import type { CarrierEvent, EventCheckType } from '../gateway/events.js';
import type { Queryable } from '../db/queryable.js';

/** What authenticates an account's events: looked up by the name its carrier knows it by. */
export interface EventAccount {
  readonly carrierId: string;
  readonly secret: string | null;
}

export async function eventAccount(db: Queryable, gatewayAccount: string): Promise<EventAccount | null> {
  const { rows } = await db.query<{ id: string; event_secret: string | null }>(
    'SELECT id::text, event_secret FROM carrier_account WHERE gateway_account = $1',
    [gatewayAccount],
  );
  const row = rows[0];
  return row ? { carrierId: row.id, secret: row.event_secret } : null;
}

/** Stores the events of one request in one statement; an event id the account already sent is a duplicate. */
export async function storeEvents(db: Queryable, carrierId: string, events: readonly CarrierEvent[]): Promise<{ accepted: number; duplicates: number }> {
  const { rowCount } = await db.query(
    `INSERT INTO carrier_event (carrier_id, event_id, check_type, iccid, observed_at, changed_at, observation)
     SELECT $1::bigint, e.id, e.type, e.iccid, e.observed_at, e.changed_at, e.observation
       FROM unnest($2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::jsonb[])
         AS e(id, type, iccid, observed_at, changed_at, observation)
     ON CONFLICT (carrier_id, event_id) DO NOTHING`,
    [
      carrierId,
      events.map((e) => e.id),
      events.map((e) => e.type),
      events.map((e) => e.iccid),
      events.map((e) => e.observedAt),
      events.map((e) => e.changedAt ?? null),
      events.map((e) => JSON.stringify(e.observation)),
    ],
  );
  const accepted = rowCount ?? 0;
  return { accepted, duplicates: events.length - accepted };
}

/** Events stored and not yet applied (the backlog bound of POST /v1/events). */
export async function pendingEventCount(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM carrier_event WHERE status = 'pending'");
  return rows[0]?.n ?? 0;
}

/** A pending event with the card its ICCID names in its account (null: the account holds no such card). */
export interface PendingEvent {
  readonly id: string;
  readonly carrierId: string;
  readonly eventId: string;
  readonly type: EventCheckType;
  readonly cardId: string | null;
  /** The card's status (its polling intervals follow from it); null with the card. */
  readonly cardStatus: string | null;
  readonly receivedAt: Date;
  readonly observedAt: Date;
  readonly changedAt: Date | null;
  readonly observation: Record<string, unknown>;
}

/**
 * Locks up to `limit` of the oldest pending events for this transaction (SKIP LOCKED: several
 * appliers share the backlog), each with its card.
 */
export async function lockPendingEvents(db: Queryable, limit: number): Promise<PendingEvent[]> {
  const { rows } = await db.query<{
    id: string;
    carrier_id: string;
    event_id: string;
    check_type: EventCheckType;
    card_id: string | null;
    card_status: string | null;
    received_at: Date;
    observed_at: Date;
    changed_at: Date | null;
    observation: Record<string, unknown>;
  }>(
    `WITH batch AS (
       SELECT id FROM carrier_event WHERE status = 'pending' ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
     )
     SELECT e.id::text, e.carrier_id::text, e.event_id, e.check_type, c.id::text AS card_id, c.status AS card_status, e.received_at, e.observed_at, e.changed_at, e.observation
       FROM carrier_event e JOIN batch b ON b.id = e.id
       LEFT JOIN iot_card c ON c.iccid = e.iccid AND c.carrier_id = e.carrier_id
      ORDER BY e.id`,
    [limit],
  );
  return rows.map((r) => ({
    id: r.id,
    carrierId: r.carrier_id,
    eventId: r.event_id,
    type: r.check_type,
    cardId: r.card_id,
    cardStatus: r.card_status,
    receivedAt: r.received_at,
    observedAt: r.observed_at,
    changedAt: r.changed_at,
    observation: r.observation,
  }));
}

/** Marks events applied (with their card) or `unknown_card`. */
export async function markEvents(db: Queryable, events: readonly PendingEvent[]): Promise<void> {
  if (events.length === 0) return;
  await db.query(
    `UPDATE carrier_event e SET status = CASE WHEN m.card_id IS NULL THEN 'unknown_card' ELSE 'applied' END, card_id = m.card_id, applied_at = now()
       FROM unnest($1::bigint[], $2::bigint[]) AS m(id, card_id) WHERE e.id = m.id`,
    [events.map((e) => e.id), events.map((e) => e.cardId)],
  );
}
