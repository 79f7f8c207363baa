/**
 * Seeds carrier accounts, polling configs and cards for a scenario through the same paths
 * production uses (PostgreSQL rows, then the lifecycle service's Redis upserts), and mirrors each
 * account's limits in the simulator so the instrument enforces exactly the configured budget.
 */
import { createCarrier } from '../../src/db/carriers.js';
import { createPollingConfig } from '../../src/db/pollingConfigs.js';
import type { Carrier, NewCarrier } from '../../src/domain/carrier.js';
import type { CardStatus, ScopedCard } from '../../src/domain/card.js';
import type { Intervals } from '../../src/domain/pollingConfig.js';
import type { CheckType } from '../../src/workflow-safe/checkTypes.js';
import type { BenchStack } from './stack.js';

/** Cards go to the lifecycle service in chunks this big (one INSERT and one pipeline each). */
const CREATE_CHUNK = 5000;

export interface AccountSpec {
  readonly name: string;
  /** Configured QPS per rate-limit group (the simulator enforces the same). */
  readonly qps: Readonly<Record<string, number>>;
  readonly typeGroups: NonNullable<NewCarrier['typeGroups']>;
  readonly cards: number;
  readonly intervalsSec: Intervals;
  readonly latencyMs: { readonly p50: number; readonly p99: number };
  readonly inflightLimit?: number;
  /** The share of a round's capacity the priority lane takes first (0 = all of it); the product's default when absent. */
  readonly priorityRatio?: number;
  /** Real-name control: realname calls count against the claim budget. */
  readonly realnameControl?: boolean;
}

export interface SeededAccount {
  readonly spec: AccountSpec;
  readonly carrier: Carrier;
  readonly gatewayAccount: string;
  /** Account serial in the ICCIDs (for adding more cards with {@link addCards}). */
  readonly serial: number;
  readonly cards: ScopedCard[];
}

let accountSerial = 0;

/** ICCIDs unique per account and card: 8986 + 4-digit account serial + 12-digit card index. */
export function iccidFor(serial: number, index: number): string {
  return `8986${String(serial).padStart(4, '0')}${String(index).padStart(12, '0')}`;
}

export async function seedAccount(stack: BenchStack, spec: AccountSpec): Promise<SeededAccount> {
  accountSerial += 1;
  const serial = accountSerial;
  const gatewayAccount = `${spec.name}-gw`;
  const carrier = await createCarrier(stack.pool, {
    name: spec.name,
    gatewayAccount,
    groups: Object.entries(spec.qps).map(([name, qps]) => ({ name, qps })),
    typeGroups: spec.typeGroups,
    inflightLimit: spec.inflightLimit ?? 200,
    realnameControl: spec.realnameControl ?? false,
    ...(spec.priorityRatio === undefined ? {} : { priorityRatio: spec.priorityRatio }),
    leaseMs: 20_000,
    stepTimeoutMs: 3000,
    totalTimeoutMs: 10_000,
    backoffBaseMs: 1000,
  });
  await createPollingConfig(stack.pool, { name: `${spec.name}-intervals`, priority: 10, match: { carrierId: carrier.id }, intervalsSec: spec.intervalsSec });
  await stack.simulator.updateAccount(gatewayAccount, { groups: { ...spec.qps }, typeGroups: spec.typeGroups, latencyMs: { ...spec.latencyMs }, errorRate: 0 });
  const cards = await addCards(stack, carrier.id, serial, 0, spec.cards, 'active');
  return { spec, carrier, gatewayAccount, serial, cards };
}

/** Adds `count` cards with the given status to an account (indexes from `firstIndex`). */
export async function addCards(
  stack: BenchStack,
  carrierId: string,
  serial: number,
  firstIndex: number,
  count: number,
  status: CardStatus,
  chunk = CREATE_CHUNK,
): Promise<ScopedCard[]> {
  const created: ScopedCard[] = [];
  for (let start = 0; start < count; start += chunk) {
    const inputs = Array.from({ length: Math.min(chunk, count - start) }, (_, i) => ({
      iccid: iccidFor(serial, firstIndex + start + i),
      carrierId,
      status,
      enablePolling: true,
    }));
    const result = await stack.services.lifecycle.createCards(inputs);
    if (result.rejected.length > 0) throw new Error(`seed rejected ${result.rejected.length} cards: ${JSON.stringify(result.rejected[0])}`);
    created.push(...result.created);
  }
  return created;
}

/**
 * Spreads the cards' first dues evenly over one interval from `leadMs` on: a fleet in its steady
 * state, its cards created at different times. The lifecycle path gives new cards dues jittered over
 * max(interval/10, 2 s) (docs/design.md, 'Lifecycle'), and each card keeps its phase ('Finish
 * rules'), so cards created in one batch stay a burst every interval for good.
 */
export async function spreadDues(
  stack: BenchStack,
  account: Pick<SeededAccount, 'carrier' | 'cards'>,
  type: CheckType,
  intervalMs: number,
  leadMs = 1000,
): Promise<void> {
  const now = await stack.deps.store.clockNow();
  const step = intervalMs / Math.max(1, account.cards.length);
  await stack.deps.store.upsertMany(
    account.cards.map((card, i) => ({ carrierId: account.carrier.id, cardId: card.id, now, dues: { [type]: Math.round(now + leadMs + i * step) } })),
  );
}
