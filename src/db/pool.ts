/** PostgreSQL connection pool bound to the configured schema. */
import pg from 'pg';
import { logConnectionErrors, type ConnectionLogger } from '../runtime/connectionErrors.js';

export type Pool = pg.Pool;

export interface PoolOptions {
  readonly url: string;
  readonly schema: string;
  readonly max?: number;
  readonly applicationName?: string;
  /** Where lost connections are reported: the process' logger. */
  readonly logger?: ConnectionLogger;
}

/**
 * A pool that survives a PostgreSQL restart: a connection the server closes is discarded (and
 * logged), queries meanwhile fail for their callers, and the next query connects again.
 */
export function createPool(options: PoolOptions): pg.Pool {
  const applicationName = options.applicationName ?? 'card-poller';
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.max ?? 10,
    application_name: applicationName,
    // Every connection resolves unqualified names in our schema (tests use one schema each).
    options: `-c search_path=${options.schema}`,
  });
  // pg.Pool removes an idle client whose connection fails and re-emits the error on the pool;
  // with no listener that event would throw and end the process.
  const errors = logConnectionErrors(pool, `postgres(${applicationName})`, { logger: options.logger });
  pool.on('connect', (client) => {
    // A checked-out client emits 'error' on its own (e.g. between two statements of a
    // transaction), where the pool listens to idle clients only. Its caller learns of it from the
    // failing query, and release() discards the broken client: the event needs a listener only.
    client.on('error', () => undefined);
    errors.recovered();
  });
  return pool;
}

/** Runs fn inside a transaction on one client; rolls back on any error. */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
