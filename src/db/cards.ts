/**
 * Cards with their polling scope (docs/design.md, 'PostgreSQL and records'). Every read returns
 * `polled`: the card's own switch and, unless standalone, its bound device's switch — computed in
 * SQL so batch lifecycle operations need one statement, not one per card.
 */
import type { Card, CardStatus, ScopedCard } from '../domain/card.js';
import type { CardRow, CardUpdateRow } from '../domain/cardInput.js';
import { DomainError } from '../domain/errors.js';
import { requireId } from '../domain/validate.js';
import type { Queryable } from './queryable.js';

export interface ScopedCardRow {
  id: string;
  iccid: string;
  msisdn: string | null;
  carrier_id: string;
  status: CardStatus;
  enable_polling: boolean;
  is_standalone: boolean;
  device_id: string | null;
  polled: boolean;
}

/** Columns of a scoped card; `c` = iot_card, `b` = active binding, `d` = device. */
export const SCOPED_COLUMNS = `c.id::text, c.iccid, c.msisdn, c.carrier_id::text, c.status, c.enable_polling, c.is_standalone,
  b.device_id::text, (c.enable_polling AND (c.is_standalone OR coalesce(d.enable_polling, true))) AS polled`;

/** Joins that SCOPED_COLUMNS needs, after `FROM iot_card c` (or a CTE aliased c). */
export const SCOPE_JOINS = `LEFT JOIN device_sim_binding b ON b.card_id = c.id AND b.unbound_at IS NULL
  LEFT JOIN device d ON d.id = b.device_id`;

export function toScopedCard(row: ScopedCardRow): ScopedCard {
  const card: Card = {
    id: row.id,
    iccid: row.iccid,
    carrierId: row.carrier_id,
    status: row.status,
    enablePolling: row.enable_polling,
    standalone: row.is_standalone,
    ...(row.msisdn === null ? {} : { msisdn: row.msisdn }),
    ...(row.device_id === null ? {} : { deviceId: row.device_id }),
  };
  return { ...card, polled: row.polled };
}

export async function findCards(db: Queryable, ids: readonly string[]): Promise<ScopedCard[]> {
  const { rows } = await db.query<ScopedCardRow>(`SELECT ${SCOPED_COLUMNS} FROM iot_card c ${SCOPE_JOINS} WHERE c.id = ANY($1::bigint[]) ORDER BY c.id`, [ids]);
  return rows.map(toScopedCard);
}

export async function getCard(db: Queryable, id: string): Promise<ScopedCard> {
  const [card] = await findCards(db, [requireId(id, 'cardId')]);
  if (!card) throw DomainError.notFound('cardId', `card ${id} does not exist`);
  return card;
}

export async function findCardByIccid(db: Queryable, iccid: string): Promise<ScopedCard | null> {
  const { rows } = await db.query<ScopedCardRow>(`SELECT ${SCOPED_COLUMNS} FROM iot_card c ${SCOPE_JOINS} WHERE c.iccid = $1`, [iccid.toUpperCase()]);
  return rows[0] ? toScopedCard(rows[0]) : null;
}

/** ICCIDs among `iccids` that already exist (for batch rejection). */
export async function existingIccids(db: Queryable, iccids: readonly string[]): Promise<Set<string>> {
  const { rows } = await db.query<{ iccid: string }>('SELECT iccid FROM iot_card WHERE iccid = ANY($1::text[])', [iccids]);
  return new Set(rows.map((row) => row.iccid));
}

/**
 * Inserts valid rows in one statement (plus one for device bindings); a row whose ICCID was
 * taken meanwhile is skipped (ON CONFLICT) and reported by its absence. Run inside a transaction.
 */
export async function insertCards(db: Queryable, cards: readonly CardRow[]): Promise<ScopedCard[]> {
  const idByIccid = await insertCardRows(db, cards);
  return findCards(db, [...idByIccid.values()]);
}

/**
 * The batch insert behind {@link insertCards}, answering only ICCID → new id: an ICCID that
 * already exists is left alone and absent from the answer. Run inside a transaction (the
 * bindings are a second statement).
 */
export async function insertCardRows(db: Queryable, cards: readonly CardRow[]): Promise<Map<string, string>> {
  if (cards.length === 0) return new Map();
  const inserted = await db.query<{ id: string; iccid: string }>(
    `INSERT INTO iot_card (iccid, msisdn, carrier_id, status, enable_polling, is_standalone)
     SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::boolean[], $6::boolean[])
     ON CONFLICT (iccid) DO NOTHING
     RETURNING id::text, iccid`,
    [
      cards.map((card) => card.iccid),
      cards.map((card) => card.msisdn),
      cards.map((card) => card.carrierId),
      cards.map((card) => card.status),
      cards.map((card) => card.enablePolling),
      cards.map((card) => card.standalone),
    ],
  );
  const idByIccid = new Map(inserted.rows.map((row) => [row.iccid, row.id]));
  const bound = cards.filter((card) => card.deviceId !== null && idByIccid.has(card.iccid));
  if (bound.length > 0) {
    await db.query(`INSERT INTO device_sim_binding (device_id, card_id) SELECT * FROM unnest($1::bigint[], $2::bigint[])`, [
      bound.map((card) => card.deviceId),
      bound.map((card) => idByIccid.get(card.iccid)),
    ]);
  }
  return idByIccid;
}

/** An existing card an update matched, with what it was before. */
export interface UpdatedCardRow {
  readonly id: string;
  readonly iccid: string;
  readonly carrierId: string;
  readonly previousCarrierId: string;
  /** Account, status, switch, standalone or device changed: what decides whether and how the card is polled. */
  readonly pollingChanged: boolean;
}

/**
 * Updates existing cards found by ICCID with the fields each row gives (one statement for the
 * cards, two for the device bindings that change). ICCIDs that do not exist are absent from the
 * answer. Cards whose values are already those of the row are matched but not written. Run
 * inside a transaction.
 */
export async function updateCardsByIccid(db: Queryable, updates: readonly CardUpdateRow[]): Promise<UpdatedCardRow[]> {
  if (updates.length === 0) return [];
  const { rows } = await db.query<{
    id: string;
    iccid: string;
    carrier_id: string;
    previous_carrier_id: string;
    old_device_id: string | null;
    device_id: string | null;
    polling_changed: boolean;
  }>(
    `WITH u AS (
       SELECT * FROM unnest($1::text[], $2::bigint[], $3::boolean[], $4::text[], $5::text[], $6::boolean[], $7::boolean[], $8::boolean[], $9::bigint[])
         AS x(iccid, carrier_id, msisdn_given, msisdn, status, enable_polling, is_standalone, device_given, device_id)
     ), old AS (
       SELECT c.id, c.iccid, c.msisdn, c.carrier_id, c.status, c.enable_polling, c.is_standalone, b.device_id
         FROM iot_card c
         JOIN u ON u.iccid = c.iccid
         LEFT JOIN device_sim_binding b ON b.card_id = c.id AND b.unbound_at IS NULL
          FOR UPDATE OF c
     ), next AS (
       SELECT old.id, old.iccid, old.carrier_id AS old_carrier_id, old.device_id AS old_device_id,
              u.carrier_id,
              CASE WHEN u.msisdn_given THEN u.msisdn ELSE old.msisdn END AS msisdn,
              coalesce(u.status, old.status) AS status,
              coalesce(u.enable_polling, old.enable_polling) AS enable_polling,
              coalesce(u.is_standalone, old.is_standalone) AS is_standalone,
              CASE WHEN u.device_given THEN u.device_id ELSE old.device_id END AS device_id,
              old.status AS old_status, old.enable_polling AS old_enable_polling, old.is_standalone AS old_is_standalone
         FROM old JOIN u ON u.iccid = old.iccid
     ), written AS (
       UPDATE iot_card t
          SET carrier_id = next.carrier_id, msisdn = next.msisdn, status = next.status,
              enable_polling = next.enable_polling, is_standalone = next.is_standalone, updated_at = now()
         FROM next
        WHERE t.id = next.id
          AND (t.carrier_id, t.msisdn, t.status, t.enable_polling, t.is_standalone)
              IS DISTINCT FROM (next.carrier_id, next.msisdn, next.status, next.enable_polling, next.is_standalone)
       RETURNING t.id
     )
     SELECT next.id::text, next.iccid, next.carrier_id::text, next.old_carrier_id::text AS previous_carrier_id,
            next.old_device_id::text, next.device_id::text,
            ((next.old_carrier_id, next.old_status, next.old_enable_polling, next.old_is_standalone)
               IS DISTINCT FROM (next.carrier_id, next.status, next.enable_polling, next.is_standalone)
              OR next.old_device_id IS DISTINCT FROM next.device_id) AS polling_changed
       FROM next`,
    [
      updates.map((update) => update.iccid),
      updates.map((update) => update.carrierId),
      updates.map((update) => update.msisdn !== undefined),
      updates.map((update) => update.msisdn ?? null),
      updates.map((update) => update.status ?? null),
      updates.map((update) => update.enablePolling ?? null),
      updates.map((update) => update.standalone ?? null),
      updates.map((update) => update.deviceId !== undefined),
      updates.map((update) => update.deviceId ?? null),
    ],
  );
  // Bindings change in their own statements: a card may hold one active binding (unique index),
  // so the old one must be closed before the new one is opened.
  const rebound = rows.filter((row) => row.old_device_id !== row.device_id);
  if (rebound.length > 0) {
    await db.query('UPDATE device_sim_binding SET unbound_at = now() WHERE card_id = ANY($1::bigint[]) AND unbound_at IS NULL', [rebound.map((row) => row.id)]);
    const bound = rebound.filter((row) => row.device_id !== null);
    if (bound.length > 0) {
      await db.query('INSERT INTO device_sim_binding (device_id, card_id) SELECT * FROM unnest($1::bigint[], $2::bigint[])', [
        bound.map((row) => row.device_id),
        bound.map((row) => row.id),
      ]);
    }
  }
  return rows.map((row) => ({
    id: row.id,
    iccid: row.iccid,
    carrierId: row.carrier_id,
    previousCarrierId: row.previous_carrier_id,
    pollingChanged: row.polling_changed,
  }));
}

/** Sets each card's status in one statement; returns the changed cards with their scope. Unknown ids are absent. */
export async function updateStatuses(db: Queryable, changes: readonly { cardId: string; status: CardStatus }[]): Promise<ScopedCard[]> {
  const { rows } = await db.query<ScopedCardRow>(
    `WITH u AS (
       SELECT DISTINCT ON (id) id, status FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS x(id, status, n) ORDER BY id, n DESC
     ), c AS (
       UPDATE iot_card t SET status = u.status, updated_at = now() FROM u WHERE t.id = u.id RETURNING t.*
     )
     SELECT ${SCOPED_COLUMNS} FROM c ${SCOPE_JOINS} ORDER BY c.id`,
    [changes.map((change) => change.cardId), changes.map((change) => change.status)],
  );
  return rows.map(toScopedCard);
}

export async function setCardPolling(db: Queryable, cardId: string, enabled: boolean): Promise<ScopedCard> {
  const { rows } = await db.query<ScopedCardRow>(
    `WITH c AS (UPDATE iot_card SET enable_polling = $2, updated_at = now() WHERE id = $1::bigint RETURNING *)
     SELECT ${SCOPED_COLUMNS} FROM c ${SCOPE_JOINS}`,
    [requireId(cardId, 'cardId'), enabled],
  );
  if (!rows[0]) throw DomainError.notFound('cardId', `card ${cardId} does not exist`);
  return toScopedCard(rows[0]);
}

/** Moves a card to another account; returns the card and the account it left. */
export async function setCardCarrier(db: Queryable, cardId: string, carrierId: string): Promise<{ card: ScopedCard; previousCarrierId: string }> {
  const { rows } = await db.query<ScopedCardRow & { previous_carrier_id: string }>(
    `WITH old AS (SELECT id, carrier_id FROM iot_card WHERE id = $1::bigint FOR UPDATE),
     c AS (UPDATE iot_card t SET carrier_id = $2::bigint, updated_at = now() FROM old WHERE t.id = old.id
           RETURNING t.*, old.carrier_id AS previous_carrier_id)
     SELECT ${SCOPED_COLUMNS}, c.previous_carrier_id::text FROM c ${SCOPE_JOINS}`,
    [requireId(cardId, 'cardId'), requireId(carrierId, 'carrierId')],
  );
  const row = rows[0];
  if (!row) throw DomainError.notFound('cardId', `card ${cardId} does not exist`);
  return { card: toScopedCard(row), previousCarrierId: row.previous_carrier_id };
}

/** Whether the card's row exists (a record's write tells its deleted card from other failures). */
export async function cardExists(db: Queryable, cardId: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM iot_card WHERE id = $1::bigint', [requireId(cardId, 'cardId')]);
  return (rowCount ?? 0) > 0;
}

/** Deletes a card (executions, alerts, items cascade); returns it as it was, or null. */
export async function deleteCard(db: Queryable, cardId: string): Promise<Card | null> {
  const { rows } = await db.query<ScopedCardRow>(
    `WITH c AS (DELETE FROM iot_card WHERE id = $1::bigint RETURNING *)
     SELECT c.id::text, c.iccid, c.msisdn, c.carrier_id::text, c.status, c.enable_polling, c.is_standalone,
            NULL::text AS device_id, false AS polled FROM c`,
    [requireId(cardId, 'cardId')],
  );
  return rows[0] ? toScopedCard(rows[0]) : null;
}

/** One page of an account's cards in id order (rebuild, listings). */
export async function pageCarrierCards(db: Queryable, carrierId: string, afterId: string, limit: number): Promise<ScopedCard[]> {
  const { rows } = await db.query<ScopedCardRow>(
    `SELECT ${SCOPED_COLUMNS} FROM iot_card c ${SCOPE_JOINS}
      WHERE c.carrier_id = $1::bigint AND c.id > $2::bigint ORDER BY c.id LIMIT $3`,
    [carrierId, afterId, limit],
  );
  return rows.map(toScopedCard);
}

export interface CardFilter {
  readonly carrierId?: string;
  readonly status?: CardStatus;
  readonly polled?: boolean;
}

/** Keyset-paginated listing for the API: cards with id > afterId. */
export async function listCards(db: Queryable, filter: CardFilter, afterId = '0', limit = 100): Promise<ScopedCard[]> {
  const { rows } = await db.query<ScopedCardRow>(
    `SELECT * FROM (
       SELECT ${SCOPED_COLUMNS} FROM iot_card c ${SCOPE_JOINS}
        WHERE c.id > $1::bigint AND ($2::bigint IS NULL OR c.carrier_id = $2::bigint) AND ($3::text IS NULL OR c.status = $3)
        ORDER BY c.id
     ) s WHERE ($4::boolean IS NULL OR s.polled = $4) ORDER BY s.id::bigint LIMIT $5`,
    [afterId, filter.carrierId ?? null, filter.status ?? null, filter.polled ?? null, limit],
  );
  return rows.map(toScopedCard);
}
