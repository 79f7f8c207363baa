/**
 * Measuring helpers over the instruments: the simulator's counters, this process's Prometheus
 * registry (deferrals), card_execution rows (lateness), and counters of Redis commands and SQL
 * statements this process sends (the workers run in it, so that is the orchestration's cost).
 */
import pg from 'pg';
import type { Command } from 'ioredis';
import type { RedisConnection } from '../../src/redis/connection.js';
import type { Registry } from 'prom-client';
import type { SimStats } from '../../src/simulator/model.js';
import type { Pool } from '../../src/db/pool.js';
import { distribution, type Distribution } from './stats.js';

export type GroupCalls = Record<string, Record<string, { calls: number; rejected: number; maxPerSecond: number }>>;

/** Per account and group: accepted calls, rejected calls and the highest one-second count so far. */
export function simulatorCounts(simStats: SimStats): GroupCalls {
  const out: GroupCalls = {};
  for (const [account, stats] of Object.entries(simStats.accounts)) {
    out[account] = {};
    for (const [group, g] of Object.entries(stats.groups)) out[account][group] = { calls: g.calls, rejected: g.rejected, maxPerSecond: g.maxPerSecond };
  }
  return out;
}

/** Sum of a counter's values per label set, keyed by the labels joined with '|'. */
export async function counterValues(registry: Registry, name: string, labels: readonly string[]): Promise<Map<string, number>> {
  const metric = registry.getSingleMetric(name);
  const values = new Map<string, number>();
  if (!metric) return values;
  const data = await metric.get();
  for (const value of data.values) {
    const key = labels.map((label) => String(value.labels[label] ?? '')).join('|');
    values.set(key, (values.get(key) ?? 0) + value.value);
  }
  return values;
}

export interface LatenessWindow {
  readonly executions: number;
  readonly latenessMs: Distribution;
  readonly outcomes: Record<string, number>;
}

/** Lateness (start − earliest due) of executions that started inside [from, to). */
export async function latenessBetween(pool: Pool, from: Date, to: Date, where = 'true'): Promise<LatenessWindow> {
  const { rows } = await pool.query<{ lateness: number; outcome: string }>(
    `SELECT (details->>'latenessMs')::double precision AS lateness, outcome
       FROM card_execution WHERE started_at >= $1 AND started_at < $2 AND ${where}`,
    [from, to],
  );
  const outcomes: Record<string, number> = {};
  for (const row of rows) outcomes[row.outcome] = (outcomes[row.outcome] ?? 0) + 1;
  return { executions: rows.length, latenessMs: distribution(rows.map((r) => r.lateness)), outcomes };
}

export async function executionsBetween(pool: Pool, from: Date, to: Date): Promise<number> {
  const { rows } = await pool.query<{ n: string }>('SELECT count(*)::text AS n FROM card_execution WHERE started_at >= $1 AND started_at < $2', [from, to]);
  return Number(rows[0]?.n ?? 0);
}

export interface CommandCounter {
  readonly count: () => number;
  readonly byName: () => Record<string, number>;
}

/**
 * Counts the commands sent on one ioredis connection by wrapping its `sendCommand` (pipelined
 * commands pass through it too). Only this process's traffic: the shared server's INFO
 * commandstats would include other users' commands.
 */
export function countRedisCommands(redis: RedisConnection): CommandCounter {
  const counts = new Map<string, number>();
  // Both connection kinds route every command through sendCommand (a cluster before picking the node).
  const target = redis as unknown as { sendCommand: (command: Command, ...rest: unknown[]) => unknown };
  const original = target.sendCommand.bind(redis);
  target.sendCommand = (command: Command, ...rest: unknown[]) => {
    counts.set(command.name, (counts.get(command.name) ?? 0) + 1);
    return original(command, ...rest);
  };
  return {
    count: () => [...counts.values()].reduce((a, b) => a + b, 0),
    byName: () => Object.fromEntries(counts),
  };
}

let sqlStatements = 0;
let sqlPatched = false;

/**
 * Counts every SQL statement any pg client of this process sends (pool queries and transaction
 * clients alike) by wrapping pg.Client.prototype.query once. pg_stat_statements is not loaded
 * on the dev server, and pg_stat_database would count other users' transactions too.
 */
export function countSqlStatements(): { readonly count: () => number } {
  if (!sqlPatched) {
    sqlPatched = true;
    const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
    const original = proto.query;
    proto.query = function query(this: unknown, ...args: unknown[]): unknown {
      sqlStatements += 1;
      return original.apply(this, args);
    };
  }
  return { count: () => sqlStatements };
}
