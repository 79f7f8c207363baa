/**
 * Applies the numbered plain-SQL files in `migrations/` in order, each in its own transaction,
 * under an advisory lock so several processes can start at once. Applied versions are recorded in
 * `schema_migrations`; a database that has versions this code does not know stops start-up.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';

export const MIGRATIONS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../migrations');
const FILE_NAME = /^(\d{6})_([a-z0-9_]+)\.sql$/;

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

export class DatabaseNewerThanCodeError extends Error {
  constructor(
    readonly databaseVersion: number,
    readonly codeVersion: number,
  ) {
    super(
      `Database schema is at migration ${databaseVersion} but this code only knows up to ${codeVersion}: ` +
        'deploy the newer code (or restore a matching database) instead of running this version',
    );
    this.name = 'DatabaseNewerThanCodeError';
  }
}

export function readMigrations(dir = MIGRATIONS_DIR): Migration[] {
  const migrations = readdirSync(dir)
    .filter((file) => file.endsWith('.sql'))
    .map((file) => {
      const match = FILE_NAME.exec(file);
      if (!match?.[1] || !match[2]) throw new Error(`Migration file name "${file}" must look like 000001_name.sql`);
      return { version: Number(match[1]), name: match[2], sql: readFileSync(join(dir, file), 'utf8') };
    })
    .sort((a, b) => a.version - b.version);
  migrations.forEach((migration, index) => {
    if (migration.version !== index + 1) throw new Error(`Migrations must be numbered 1..n without gaps; found ${migration.version} at position ${index + 1}`);
  });
  return migrations;
}

export interface MigrateResult {
  readonly applied: readonly number[];
  readonly current: number;
}

function quoteIdent(identifier: string): string {
  return `"${identifier.replace(/"/g, '""')}"`;
}

/** Migrates `schema` to the newest version. Idempotent. */
export async function migrate(pool: pg.Pool, schema: string, migrations = readMigrations()): Promise<MigrateResult> {
  const client = await pool.connect();
  const schemaIdent = quoteIdent(schema);
  // Set when the lock could not be released: the client is then closed rather than pooled, which
  // ends its session and with it the lock.
  let unlockFailure: Error | undefined;
  try {
    // One lock per schema: concurrent starters wait, then find nothing left to do.
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [`migrate:${schema}`]);
    try {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${schemaIdent}`);
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${schemaIdent}.schema_migrations (
           version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
      );
      const { rows } = await client.query<{ version: number }>(`SELECT version FROM ${schemaIdent}.schema_migrations ORDER BY version`);
      const done = new Set(rows.map((row) => row.version));
      const newest = migrations.at(-1)?.version ?? 0;
      const databaseVersion = Math.max(0, ...done);
      if (databaseVersion > newest) throw new DatabaseNewerThanCodeError(databaseVersion, newest);
      const applied: number[] = [];
      for (const migration of migrations) {
        if (done.has(migration.version)) continue;
        await client.query('BEGIN');
        try {
          await client.query(`SET LOCAL search_path TO ${schemaIdent}`);
          await client.query(migration.sql);
          await client.query(`INSERT INTO ${schemaIdent}.schema_migrations (version, name) VALUES ($1, $2)`, [migration.version, migration.name]);
          await client.query('COMMIT');
        } catch (error) {
          // The connection may be gone (database restart): report the migration's error, not the rollback's.
          await client.query('ROLLBACK').catch(() => undefined);
          throw new Error(`Migration ${migration.version}_${migration.name} failed: ${(error as Error).message}`, { cause: error });
        }
        applied.push(migration.version);
      }
      return { applied, current: Math.max(databaseVersion, ...applied) };
    } finally {
      // Not thrown: it would replace the error that brought us here (e.g. the lost connection).
      await client.query('SELECT pg_advisory_unlock(hashtext($1))', [`migrate:${schema}`]).catch((error: unknown) => {
        unlockFailure = error instanceof Error ? error : new Error(String(error));
      });
    }
  } finally {
    client.release(unlockFailure);
  }
}
