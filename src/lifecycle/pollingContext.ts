/**
 * What every lifecycle event needs besides the cards: the polling mode and the enabled polling
 * configs, read in one statement so a batch event stays a constant number of queries.
 */
import type { Queryable } from '../db/queryable.js';
import { toPollingConfig, type ConfigRow } from '../db/pollingConfigs.js';
import type { PollingMode } from '../workflow-safe/pollingMode.js';
import { IntervalResolver } from '../domain/pollingConfig.js';

export interface PollingContext {
  readonly mode: PollingMode;
  readonly intervals: IntervalResolver;
}

export async function loadPollingContext(db: Queryable): Promise<PollingContext> {
  const { rows } = await db.query<{ mode: unknown; configs: ConfigRow[] }>(
    `SELECT (SELECT value FROM system_config WHERE key = 'polling.mode') AS mode,
            coalesce((SELECT json_agg(json_build_object(
                'id', id::text, 'name', name, 'priority', priority, 'enabled', enabled, 'match', match,
                'interval_card_status_sec', interval_card_status_sec, 'interval_carddata_sec', interval_carddata_sec,
                'interval_realname_sec', interval_realname_sec, 'interval_package_sec', interval_package_sec))
               FROM polling_config WHERE enabled), '[]'::json) AS configs`,
  );
  const row = rows[0]!;
  // Missing row = migration default (carrier); the table check rules out anything else.
  const mode: PollingMode = row.mode === 'legacy' ? 'legacy' : 'carrier';
  return { mode, intervals: new IntervalResolver(row.configs.map(toPollingConfig)) };
}
