/**
 * The local `package` check (docs/design.md, 'The job' and 'Finish rules'): evaluates the card's
 * active plan from stored data — data used vs. quota, expiry — without calling the gateway. Usage
 * observed by `carddata` in the same execution wins over the stored value, which may be older.
 */
import type { Pool } from '../db/pool.js';
import type { StepResult } from '../workflow-safe/cardRun.js';

export interface PackageEvaluator {
  evaluate(cardId: string, results: readonly StepResult[]): Promise<StepResult>;
}

interface PackageRow {
  quota_kb: string;
  expires_at: Date | null;
  data_usage_kb: string | null;
}

export type PackageState = 'ok' | 'exhausted' | 'expired' | 'no_package';

export function createPackageEvaluator(pool: Pool, clock: () => number = Date.now): PackageEvaluator {
  return {
    async evaluate(cardId, results) {
      const started = clock();
      const { rows } = await pool.query<PackageRow>(
        `SELECT p.quota_kb::text, p.expires_at, c.data_usage_kb::text
           FROM iot_card c LEFT JOIN card_package p ON p.card_id = c.id AND p.active
          WHERE c.id = $1::bigint`,
        [cardId],
      );
      const row = rows[0];
      const fresh = results.find((r) => r.type === 'carddata' && r.outcome === 'success');
      const freshUsage = fresh?.outcome === 'success' ? fresh.observation?.payload.usageKb : undefined;
      const usageKb = typeof freshUsage === 'number' ? freshUsage : Number(row?.data_usage_kb ?? 0);
      const now = clock();
      let state: PackageState = 'no_package';
      let usagePct: number | null = null;
      if (row?.quota_kb != null) {
        const quota = Number(row.quota_kb);
        usagePct = quota > 0 ? Math.round((usageKb / quota) * 10_000) / 100 : 100;
        const expired = row.expires_at !== null && row.expires_at.getTime() <= now;
        state = expired ? 'expired' : usageKb >= quota ? 'exhausted' : 'ok';
      }
      return {
        type: 'package',
        outcome: 'success',
        gatewayMs: 0,
        observation: {
          // Unique per evaluation; the workflow hands exactly one finish result to the record step.
          collectionId: `package-${cardId}-${now}`,
          observedAt: new Date(now).toISOString(),
          payload: { state, usageKb, usagePct, durationMs: clock() - started },
        },
      };
    },
  };
}
