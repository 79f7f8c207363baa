/**
 * Switching `polling.ingest.mode` at run time (docs/design.md, 'PostgreSQL and records'). Nothing
 * has to drain first: each execution reads the mode when it is prepared (card workers cache it a
 * couple of seconds) and then writes its record itself (sync) or hands it to the stream (async);
 * the ingest workers keep consuming the stream in both modes, and every write is idempotent and
 * ordered by observation time, so records of either path may land in any order without loss or
 * rollback.
 */
import type { Pool } from '../db/pool.js';
import { writeAudit } from '../db/audit.js';
import { getIngestMode, setIngestMode, type IngestMode, type ModeSetting } from '../db/systemConfig.js';

export async function switchIngestMode(pool: Pool, mode: IngestMode, actor: string, source = 'api'): Promise<{ mode: IngestMode; changed: boolean }> {
  const before = await getIngestMode(pool);
  if (before.mode === mode) return { mode, changed: false };
  const after: ModeSetting<IngestMode> = await setIngestMode(pool, mode, actor);
  await writeAudit(pool, {
    entityType: 'system_config',
    entityId: 'polling.ingest.mode',
    action: 'mode_switched',
    actor,
    source,
    before: { mode: before.mode },
    after: { mode: after.mode },
    occurredAt: after.updatedAt,
  });
  return { mode, changed: true };
}
