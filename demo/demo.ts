/**
 * The demo data `npm start` loads into an empty database: three carrier accounts with different
 * QPS budgets and group maps, a few thousand cards, polling configs with short intervals.
 */
import type { Pool } from '../src/db/pool.js';
import { createCarrier, listCarriers } from '../src/db/carriers.js';
import { createPollingConfig } from '../src/db/pollingConfigs.js';
import type { NewCarrier } from '../src/domain/carrier.js';
import type { LifecycleService } from '../src/lifecycle/service.js';
import type { CarrierQueueStore } from '../src/redis/carrierQueueStore.js';
import type { SimulatorControl } from '../src/simulator/control.js';

interface DemoAccount {
  readonly carrier: NewCarrier;
  readonly cards: number;
  readonly latencyMs: { p50: number; p99: number };
}

/**
 * Budgets sized so every account uses well over half of its budget (55–70 % per group, with room
 * for a round that finds a group's window still full) and the three
 * together need ~20 executions/s, which one machine running everything (Temporal dev server,
 * workers, API, simulator) sustains with room to spare: the demo holds its schedule.
 */
export const DEMO_ACCOUNTS: readonly DemoAccount[] = [
  {
    carrier: {
      name: 'demo-mobile',
      gatewayAccount: 'demo-mobile',
      groups: [
        { name: 'status', qps: 6 },
        { name: 'usage', qps: 3 },
      ],
      typeGroups: { card_status: 'status', realname: 'status', carddata: 'usage' },
      realnameControl: true,
      inflightLimit: 100,
      priorityRatio: 0.3,
    },
    cards: 1000,
    latencyMs: { p50: 40, p99: 250 },
  },
  {
    carrier: {
      name: 'demo-unicom',
      gatewayAccount: 'demo-unicom',
      groups: [{ name: 'all', qps: 8 }],
      typeGroups: { card_status: 'all', realname: 'all', carddata: 'all' },
      inflightLimit: 100,
      priorityRatio: 0.2,
    },
    cards: 1000,
    latencyMs: { p50: 60, p99: 400 },
  },
  {
    carrier: {
      name: 'demo-telecom',
      gatewayAccount: 'demo-telecom',
      groups: [
        { name: 'status', qps: 6 },
        { name: 'usage', qps: 3 },
      ],
      typeGroups: { card_status: 'status', realname: 'status', carddata: 'usage' },
      inflightLimit: 150,
      priorityRatio: 0.2,
    },
    cards: 1000,
    latencyMs: { p50: 30, p99: 150 },
  },
];

/** The run shape `npm start` uses when CARD_RUN_SHAPE is not set (see demo/start.ts). */
export const DEMO_RUN_SHAPE = 'batch';

/** Intervals (seconds): with 3 000 cards spread over them, checks flow continuously. */
export const DEMO_INTERVALS_SEC = { card_status: 300, carddata: 600, realname: 1800, package: 900 } as const;

/** Mirrors the accounts' limits in the simulator `npm start` runs (a real carrier needs nothing of this). */
export async function configureSimulator(simulator: SimulatorControl): Promise<void> {
  for (const account of DEMO_ACCOUNTS) {
    await simulator.updateAccount(account.carrier.gatewayAccount, {
      groups: Object.fromEntries((account.carrier.groups ?? []).map((g) => [g.name, g.qps])),
      // Without real-name control the carrier does not charge realname calls to a group.
      typeGroups: Object.fromEntries(
        Object.entries(account.carrier.typeGroups ?? {}).filter(([type]) => type !== 'realname' || account.carrier.realnameControl === true),
      ),
      latencyMs: account.latencyMs,
      errorRate: 0.01,
    });
  }
}

/**
 * Loads the demo when no carrier account exists yet. Returns how many cards were created.
 *
 * A fresh import puts every card's first check within a tenth of its interval; the demo instead
 * spreads each type's first due over its whole interval, as in a system that has been running for
 * a while, so the load is even from the first minute (due times keep their phase afterwards).
 */
export async function loadDemoIfEmpty(pool: Pool, lifecycle: LifecycleService, store: CarrierQueueStore, log: (line: string) => void): Promise<number> {
  if ((await listCarriers(pool)).length > 0) return 0;
  await createPollingConfig(pool, { name: 'demo-default', priority: 0, intervalsSec: DEMO_INTERVALS_SEC });
  let total = 0;
  for (const [index, account] of DEMO_ACCOUNTS.entries()) {
    const carrier = await createCarrier(pool, account.carrier);
    const cards = Array.from({ length: account.cards }, (_, i) => ({
      iccid: `8986${String(index + 1).padStart(2, '0')}${String(i).padStart(14, '0')}`,
      carrierId: carrier.id,
      status: 'active' as const,
      enablePolling: true,
    }));
    const { created, rejected } = await lifecycle.createCards(cards);
    if (rejected.length > 0) throw new Error(`demo card rejected: ${JSON.stringify(rejected[0])}`);
    const now = Date.now();
    await store.upsertMany(
      created.map((card) => ({
        carrierId: carrier.id,
        cardId: card.id,
        dues: Object.fromEntries(Object.entries(DEMO_INTERVALS_SEC).map(([type, seconds]) => [type, now + Math.floor(Math.random() * seconds * 1000)])),
      })),
    );
    total += created.length;
    log(`demo: account ${carrier.name} (#${carrier.id}) with ${created.length} cards`);
  }
  return total;
}
