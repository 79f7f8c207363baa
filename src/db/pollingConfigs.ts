/** Polling config rules. Merging lives in domain/pollingConfig.ts. */
import type { CheckType } from '../workflow-safe/checkTypes.js';
import { DomainError } from '../domain/errors.js';
import {
  MIN_INTERVAL_SEC,
  type Intervals,
  type NewPollingConfig,
  type PollingConfig,
  type PollingConfigPatch,
  type PollingMatch,
} from '../domain/pollingConfig.js';
import { validateIntervals, validateMatch, validatePollingConfigPatch } from '../domain/pollingConfigInput.js';
import { requireId, requireText } from '../domain/validate.js';
import { mapped } from './errors.js';
import type { Queryable } from './queryable.js';

export interface ConfigRow {
  id: string;
  name: string;
  priority: number;
  enabled: boolean;
  match: PollingMatch;
  interval_card_status_sec: number | null;
  interval_carddata_sec: number | null;
  interval_realname_sec: number | null;
  interval_package_sec: number | null;
}

const INTERVAL_COLUMNS: Readonly<Record<CheckType, string>> = {
  card_status: 'interval_card_status_sec',
  carddata: 'interval_carddata_sec',
  realname: 'interval_realname_sec',
  package: 'interval_package_sec',
};

const SELECT_CONFIG = `SELECT id::text, name, priority, enabled, match, interval_card_status_sec, interval_carddata_sec,
  interval_realname_sec, interval_package_sec FROM polling_config`;

export function toPollingConfig(row: ConfigRow): PollingConfig {
  const intervalsSec: Intervals = {};
  if (row.interval_card_status_sec !== null) intervalsSec.card_status = row.interval_card_status_sec;
  if (row.interval_carddata_sec !== null) intervalsSec.carddata = row.interval_carddata_sec;
  if (row.interval_realname_sec !== null) intervalsSec.realname = row.interval_realname_sec;
  if (row.interval_package_sec !== null) intervalsSec.package = row.interval_package_sec;
  return { id: row.id, name: row.name, priority: row.priority, enabled: row.enabled, match: row.match, intervalsSec };
}

function intervalParams(intervals: Intervals): (number | null)[] {
  return [intervals.card_status ?? null, intervals.carddata ?? null, intervals.realname ?? null, intervals.package ?? null];
}

export interface ConfigOptions {
  /** Floor for intervals; defaults to {@link MIN_INTERVAL_SEC}. */
  readonly minIntervalSec?: number;
}

export async function createPollingConfig(db: Queryable, input: NewPollingConfig, options: ConfigOptions = {}): Promise<PollingConfig> {
  const name = requireText(input.name, 'name');
  validatePollingConfigPatch(input, options.minIntervalSec);
  const intervals = validateIntervals(input.intervalsSec, options.minIntervalSec ?? MIN_INTERVAL_SEC);
  const match = validateMatch(input.match ?? {});
  return mapped(async () => {
    const { rows } = await db.query<ConfigRow>(
      `INSERT INTO polling_config (name, priority, enabled, match, interval_card_status_sec, interval_carddata_sec,
         interval_realname_sec, interval_package_sec)
       VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8)
       RETURNING id::text, name, priority, enabled, match, interval_card_status_sec, interval_carddata_sec,
         interval_realname_sec, interval_package_sec`,
      [name, input.priority ?? 0, input.enabled ?? true, JSON.stringify(match), ...intervalParams(intervals)],
    );
    return toPollingConfig(rows[0]!);
  });
}

export async function getPollingConfig(db: Queryable, id: string): Promise<PollingConfig> {
  const { rows } = await db.query<ConfigRow>(`${SELECT_CONFIG} WHERE id = $1::bigint`, [requireId(id, 'id')]);
  if (!rows[0]) throw DomainError.notFound('id', `polling config ${id} does not exist`);
  return toPollingConfig(rows[0]);
}

export async function listPollingConfigs(db: Queryable, options: { enabledOnly?: boolean } = {}): Promise<PollingConfig[]> {
  const { rows } = await db.query<ConfigRow>(`${SELECT_CONFIG} WHERE ($1::boolean IS NOT TRUE OR enabled) ORDER BY priority DESC, polling_config.id`, [
    options.enabledOnly ?? false,
  ]);
  return rows.map(toPollingConfig);
}

/**
 * Patches a rule. `intervalsSec` given = the rule's whole interval set (absent types cleared);
 * `match` given = the whole match.
 */
export async function updatePollingConfig(db: Queryable, id: string, patch: PollingConfigPatch, options: ConfigOptions = {}): Promise<PollingConfig> {
  requireId(id, 'id');
  validatePollingConfigPatch(patch, options.minIntervalSec);
  const sets: string[] = [];
  const values: unknown[] = [id];
  const set = (column: string, value: unknown, cast = ''): void => {
    values.push(value);
    sets.push(`${column} = $${values.length}${cast}`);
  };
  if (patch.name !== undefined) set('name', patch.name.trim());
  if (patch.priority !== undefined) set('priority', patch.priority);
  if (patch.enabled !== undefined) set('enabled', patch.enabled);
  if (patch.match !== undefined) set('match', JSON.stringify(validateMatch(patch.match)), '::jsonb');
  if (patch.intervalsSec !== undefined) {
    const intervals = validateIntervals(patch.intervalsSec, options.minIntervalSec ?? MIN_INTERVAL_SEC);
    for (const [type, column] of Object.entries(INTERVAL_COLUMNS) as [CheckType, string][]) set(column, intervals[type] ?? null);
  }
  if (sets.length === 0) return getPollingConfig(db, id);
  return mapped(async () => {
    const { rows } = await db.query<ConfigRow>(
      `UPDATE polling_config SET ${sets.join(', ')}, updated_at = now() WHERE id = $1::bigint
       RETURNING id::text, name, priority, enabled, match, interval_card_status_sec, interval_carddata_sec,
         interval_realname_sec, interval_package_sec`,
      values,
    );
    if (!rows[0]) throw DomainError.notFound('id', `polling config ${id} does not exist`);
    return toPollingConfig(rows[0]);
  });
}

export async function deletePollingConfig(db: Queryable, id: string): Promise<void> {
  const result = await db.query('DELETE FROM polling_config WHERE id = $1::bigint', [requireId(id, 'id')]);
  if (result.rowCount === 0) throw DomainError.notFound('id', `polling config ${id} does not exist`);
}
