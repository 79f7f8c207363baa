/**
 * What repository functions accept: the pool (one auto-committed statement) or a client inside a
 * transaction. Both have the same `query`.
 */
import type pg from 'pg';

export type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;
