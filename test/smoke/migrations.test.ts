import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDb } from '../../testkit/db.js';
import { migrate, readMigrations, DatabaseNewerThanCodeError } from '../../src/db/migrate.js';

test('migrations: applying twice changes nothing, and a newer database is refused', async () => {
  const db = await createTestDb('migrate', { migrate: false });
  try {
    const all = readMigrations();
    const first = await migrate(db.pool, db.schema);
    assert.deepEqual(
      first.applied,
      all.map((m) => m.version),
    );
    const snapshot = async (): Promise<string> => {
      const { rows } = await db.pool.query<{ t: string }>(
        `SELECT table_name || ':' || column_name || ':' || data_type AS t FROM information_schema.columns
         WHERE table_schema = $1 ORDER BY 1`,
        [db.schema],
      );
      return rows.map((r) => r.t).join('\n');
    };
    const before = await snapshot();
    const second = await migrate(db.pool, db.schema);
    assert.deepEqual(second.applied, []);
    assert.equal(second.current, all.length);
    assert.equal(await snapshot(), before);
    const { rows } = await db.pool.query<{ value: string }>(`SELECT value #>> '{}' AS value FROM system_config WHERE key = 'polling.mode'`);
    assert.equal(rows[0]?.value, 'carrier');

    await db.pool.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [all.length + 1, 'from_the_future']);
    await assert.rejects(migrate(db.pool, db.schema), DatabaseNewerThanCodeError);
  } finally {
    await db.close();
  }
});
