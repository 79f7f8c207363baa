/** Seeds accounts, polling configs and cards for orchestration tests, and mirrors them in the simulator. */
import { createCarrier } from '../src/db/carriers.js';
import { createPollingConfig } from '../src/db/pollingConfigs.js';
import type { Carrier, NewCarrier } from '../src/domain/carrier.js';
import type { ScopedCard } from '../src/domain/card.js';
import type { Intervals } from '../src/domain/pollingConfig.js';
import type { Stack } from './orchestration.js';

export interface SeedAccount {
  readonly carrier: Carrier;
  readonly cards: ScopedCard[];
}

export interface SeedOptions {
  readonly name: string;
  readonly qps: Record<string, number>;
  readonly typeGroups: NewCarrier['typeGroups'];
  readonly cards: number;
  readonly intervalsSec: Intervals;
  /** What the simulator enforces, when it differs from the configured QPS. */
  readonly simulatorQps?: Record<string, number>;
  readonly carrier?: Partial<NewCarrier>;
  readonly simulator?: { latencyMs?: { p50: number; p99: number }; errorRate?: number };
}

export async function seedAccount(stack: Stack, options: SeedOptions): Promise<SeedAccount> {
  const gatewayAccount = `${options.name}-gw`;
  const carrier = await createCarrier(stack.db.pool, {
    name: options.name,
    gatewayAccount,
    groups: Object.entries(options.qps).map(([name, qps]) => ({ name, qps })),
    typeGroups: options.typeGroups,
    inflightLimit: 200,
    leaseMs: 20_000,
    stepTimeoutMs: 3_000,
    totalTimeoutMs: 10_000,
    backoffBaseMs: 1_000,
    ...options.carrier,
  });
  await createPollingConfig(stack.db.pool, {
    name: `${options.name}-intervals`,
    priority: 10,
    match: { carrierId: carrier.id },
    intervalsSec: options.intervalsSec,
  });
  await stack.simulator.updateAccount(gatewayAccount, {
    groups: options.simulatorQps ?? options.qps,
    typeGroups: options.typeGroups ?? {},
    latencyMs: options.simulator?.latencyMs ?? { p50: 5, p99: 20 },
    errorRate: options.simulator?.errorRate ?? 0,
  });
  const inputs = Array.from({ length: options.cards }, (_, i) => ({
    iccid: `8986${options.name.replace(/\D/g, '').padStart(4, '0')}${String(i).padStart(12, '0')}`.slice(0, 20),
    carrierId: carrier.id,
    status: 'active' as const,
    enablePolling: true,
  }));
  const { created, rejected } = await stack.services.lifecycle.createCards(inputs);
  if (rejected.length > 0) throw new Error(`seed rejected ${rejected.length} cards: ${JSON.stringify(rejected[0])}`);
  return { carrier, cards: created };
}

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs: number, everyMs = 250): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * Waits until every card of the account has a status observation: from then on a state the carrier
 * dates is a change, not a first sight (docs/design.md, 'Freshness').
 */
export async function waitForEveryCardObserved(stack: Stack, account: SeedAccount, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    'every card observed',
    async () => {
      const { rows } = await stack.db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM iot_card WHERE carrier_id = $1 AND network_observed_at IS NOT NULL',
        [account.carrier.id],
      );
      return rows[0]?.n === account.cards.length;
    },
    timeoutMs,
  );
}
