/** system_config access: polling.mode and polling.ingest.mode. */
import { DomainError } from '../domain/errors.js';
import { requireText } from '../domain/validate.js';
import type { Queryable } from './queryable.js';
import { POLLING_MODES, type PollingMode } from '../workflow-safe/pollingMode.js';

export const INGEST_MODES = ['sync', 'async'] as const;
export type IngestMode = (typeof INGEST_MODES)[number];

export interface ModeSetting<M extends string> {
  readonly mode: M;
  readonly updatedAt: Date;
  readonly updatedBy: string;
}

async function read<M extends string>(db: Queryable, key: string, allowed: readonly M[], fallback: M): Promise<ModeSetting<M>> {
  const { rows } = await db.query<{ value: unknown; updated_at: Date; updated_by: string }>(
    'SELECT value, updated_at, updated_by FROM system_config WHERE key = $1',
    [key],
  );
  const row = rows[0];
  // A missing row means the migration default; an unknown value cannot exist (table check).
  const mode = row && (allowed as readonly unknown[]).includes(row.value) ? (row.value as M) : fallback;
  return { mode, updatedAt: row?.updated_at ?? new Date(0), updatedBy: row?.updated_by ?? 'migration' };
}

async function write<M extends string>(db: Queryable, key: string, allowed: readonly M[], mode: M, updatedBy: string): Promise<ModeSetting<M>> {
  if (!allowed.includes(mode)) throw DomainError.invalid('mode', `mode must be one of ${allowed.join(', ')}`);
  const by = requireText(updatedBy, 'updatedBy');
  // Idempotent: writing the current value again only refreshes who/when.
  const { rows } = await db.query<{ updated_at: Date }>(
    `INSERT INTO system_config (key, value, updated_at, updated_by) VALUES ($1, $2::jsonb, now(), $3)
     ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = now(), updated_by = excluded.updated_by
     RETURNING updated_at`,
    [key, JSON.stringify(mode), by],
  );
  return { mode, updatedAt: rows[0]!.updated_at, updatedBy: by };
}

export const getPollingMode = (db: Queryable): Promise<ModeSetting<PollingMode>> => read(db, 'polling.mode', POLLING_MODES, 'carrier');
export const setPollingMode = (db: Queryable, mode: PollingMode, updatedBy: string): Promise<ModeSetting<PollingMode>> =>
  write(db, 'polling.mode', POLLING_MODES, mode, updatedBy);
export const getIngestMode = (db: Queryable): Promise<ModeSetting<IngestMode>> => read(db, 'polling.ingest.mode', INGEST_MODES, 'sync');
export const setIngestMode = (db: Queryable, mode: IngestMode, updatedBy: string): Promise<ModeSetting<IngestMode>> =>
  write(db, 'polling.ingest.mode', INGEST_MODES, mode, updatedBy);
