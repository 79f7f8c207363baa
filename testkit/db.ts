/**
 * Test access to the real PostgreSQL started by `npm run services:up`: each call creates a fresh
 * schema, migrates it and drops it on close, so test files never see each other's rows.
 */
import { randomUUID } from 'node:crypto';
import { loadConfig } from '../src/config/index.js';
import { createPool, type Pool } from '../src/db/pool.js';
import { migrate } from '../src/db/migrate.js';

export interface TestDb {
  readonly pool: Pool;
  readonly schema: string;
  readonly close: () => Promise<void>;
}

export function testSchemaName(label: string): string {
  return `t_${label
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '_')
    .slice(0, 30)}_${randomUUID().slice(0, 8)}`;
}

export async function createTestDb(label = 'test', options: { migrate?: boolean } = {}): Promise<TestDb> {
  const config = loadConfig();
  const schema = testSchemaName(label);
  const pool = createPool({ url: config.DATABASE_URL, schema, max: 10, applicationName: `test-${label}` });
  if (options.migrate ?? true) await migrate(pool, schema);
  return {
    pool,
    schema,
    async close() {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await pool.end();
    },
  };
}
