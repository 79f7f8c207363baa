/** Devices: whether they exist (card validation) and the device-level polling switch. */
import type { ScopedCard } from '../domain/card.js';
import { DomainError } from '../domain/errors.js';
import { requireId } from '../domain/validate.js';
import { toScopedCard, type ScopedCardRow } from './cards.js';
import type { Queryable } from './queryable.js';

/** Devices among `ids` that exist (batch validation). */
export async function existingDeviceIds(db: Queryable, ids: readonly string[]): Promise<Set<string>> {
  const { rows } = await db.query<{ id: string }>('SELECT id::text FROM device WHERE id = ANY($1::bigint[])', [ids]);
  return new Set(rows.map((row) => row.id));
}

/**
 * Flips the device switch and returns its bound non-standalone cards (whose scope it decides),
 * in one statement.
 */
export async function setDevicePolling(db: Queryable, deviceId: string, enabled: boolean): Promise<ScopedCard[]> {
  const { rows } = await db.query<ScopedCardRow & { found: boolean }>(
    `WITH dv AS (UPDATE device SET enable_polling = $2, updated_at = now() WHERE id = $1::bigint RETURNING id, enable_polling)
     SELECT true AS found, s.* FROM dv LEFT JOIN LATERAL (
       SELECT c.id::text, c.iccid, c.msisdn, c.carrier_id::text, c.status, c.enable_polling, c.is_standalone,
              b.device_id::text, (c.enable_polling AND dv.enable_polling) AS polled
         FROM device_sim_binding b JOIN iot_card c ON c.id = b.card_id
        WHERE b.device_id = dv.id AND b.unbound_at IS NULL AND NOT c.is_standalone
     ) s ON true`,
    [requireId(deviceId, 'deviceId'), enabled],
  );
  // The CTE's update is visible to this statement's own join only through dv, hence polled from dv.
  if (rows.length === 0) throw DomainError.notFound('deviceId', `device ${deviceId} does not exist`);
  return rows.filter((row) => row.id !== null).map(toScopedCard);
}
