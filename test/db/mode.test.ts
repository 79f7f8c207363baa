import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { migrate } from '../../src/db/migrate.js';
import { getIngestMode, getPollingMode, setIngestMode, setPollingMode } from '../../src/db/systemConfig.js';
import { DomainError } from '../../src/domain/errors.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';

let db: TestDb;
before(async () => {
  db = await createTestDb('mode');
});
after(() => db.close());

test('migrations: running again applies nothing and the schema has the key constraints', async () => {
  const again = await migrate(db.pool, db.schema);
  assert.deepEqual(again.applied, []);
  const { rows } = await db.pool.query<{ indexname: string }>(`SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND indexname = ANY($2) ORDER BY 1`, [
    db.schema,
    [
      'polling_failure_alert_open_key',
      'polling_priority_item_active_card_key',
      'card_observation_observation_id_observed_at_key',
      'device_sim_binding_active_card_key',
    ],
  ]);
  assert.equal(rows.length, 4);
  const part = await db.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace s ON s.oid = p.relnamespace
      WHERE p.relname = 'card_observation' AND s.nspname = $1`,
    [db.schema],
  );
  assert.ok(part.rows[0]!.n >= 2, 'card_observation is partitioned with a default partition');
});

test('mode: read and write polling.mode and ingest mode with updated_by; bad values are rejected', async () => {
  assert.equal((await getPollingMode(db.pool)).mode, 'carrier');
  const set = await setPollingMode(db.pool, 'legacy', 'alice');
  assert.equal(set.mode, 'legacy');
  const read = await getPollingMode(db.pool);
  assert.equal(read.mode, 'legacy');
  assert.equal(read.updatedBy, 'alice');
  await setPollingMode(db.pool, 'legacy', 'bob'); // idempotent
  assert.equal((await getPollingMode(db.pool)).updatedBy, 'bob');
  await assert.rejects(setPollingMode(db.pool, 'turbo' as never, 'x'), (error: unknown) => error instanceof DomainError && error.field === 'mode');
  assert.equal((await getIngestMode(db.pool)).mode, 'sync');
  assert.equal((await setIngestMode(db.pool, 'async', 'ops')).mode, 'async');
});
