/** Devices, card bindings and the device-level polling switch. */
import type pg from 'pg';
import type { ScopedCard } from '../domain/card.js';
import { DomainError } from '../domain/errors.js';
import { requireId, requireText } from '../domain/validate.js';
import { SCOPED_COLUMNS, SCOPE_JOINS, toScopedCard, type ScopedCardRow } from './cards.js';
import { mapped } from './errors.js';
import { withTransaction } from './pool.js';
import type { Queryable } from './queryable.js';

export interface Device {
  readonly id: string;
  readonly deviceNo: string;
  readonly enablePolling: boolean;
}

interface DeviceRow {
  id: string;
  device_no: string;
  enable_polling: boolean;
}

const toDevice = (row: DeviceRow): Device => ({ id: row.id, deviceNo: row.device_no, enablePolling: row.enable_polling });

export async function createDevice(db: Queryable, input: { deviceNo: string; enablePolling?: boolean }): Promise<Device> {
  const deviceNo = requireText(input.deviceNo, 'deviceNo', 100);
  return mapped(async () => {
    const { rows } = await db.query<DeviceRow>('INSERT INTO device (device_no, enable_polling) VALUES ($1, $2) RETURNING id::text, device_no, enable_polling', [
      deviceNo,
      input.enablePolling ?? true,
    ]);
    return toDevice(rows[0]!);
  });
}

export async function getDevice(db: Queryable, id: string): Promise<Device> {
  const { rows } = await db.query<DeviceRow>('SELECT id::text, device_no, enable_polling FROM device WHERE id = $1::bigint', [requireId(id, 'deviceId')]);
  if (!rows[0]) throw DomainError.notFound('deviceId', `device ${id} does not exist`);
  return toDevice(rows[0]);
}

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

/** Binds a card to a device (closing any previous binding) in one transaction; returns the card. */
export async function bindCard(pool: pg.Pool, cardId: string, deviceId: string, slot = 1): Promise<ScopedCard> {
  requireId(cardId, 'cardId');
  requireId(deviceId, 'deviceId');
  return mapped(() =>
    withTransaction(pool, async (client) => {
      const card = await client.query('SELECT 1 FROM iot_card WHERE id = $1::bigint FOR UPDATE', [cardId]);
      if (card.rowCount === 0) throw DomainError.notFound('cardId', `card ${cardId} does not exist`);
      await client.query('UPDATE device_sim_binding SET unbound_at = now() WHERE card_id = $1::bigint AND unbound_at IS NULL', [cardId]);
      await client.query('INSERT INTO device_sim_binding (device_id, card_id, slot) VALUES ($1::bigint, $2::bigint, $3)', [deviceId, cardId, slot]);
      const { rows } = await client.query<ScopedCardRow>(`SELECT ${SCOPED_COLUMNS} FROM iot_card c ${SCOPE_JOINS} WHERE c.id = $1::bigint`, [cardId]);
      return toScopedCard(rows[0]!);
    }),
  );
}
