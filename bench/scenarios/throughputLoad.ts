/**
 * The workload shared by throughput, ceiling and direct: budgets far above what one machine can
 * execute and a near-zero gateway latency, with every card due again one second after its check,
 * so the backlog never drains and the figure is what the executor sustains, not what is offered.
 * Shape `three`: every card is polled for card_status, carddata and realname (one group each),
 * so an execution makes three gateway calls — the backlog keeps all three due at every claim.
 */
import type { AccountSpec } from '../lib/seed.js';
import type { RunShape, Shape } from '../lib/options.js';

export const THROUGHPUT_ACCOUNTS = 2;
export const THROUGHPUT_CARDS_PER_ACCOUNT = 1500;
export const THROUGHPUT_INTERVAL_SEC = 1;
export const THROUGHPUT_QPS = 5000;
export const THROUGHPUT_LATENCY = { p50: 1, p99: 3 };
/**
 * The accounts' in-flight limit in the card run shape: the production default. Higher, the card
 * shape's runs flood the engine (600: child 67 → 38 checks/s and 439 leases expired, client
 * 71 → 51/s, 2026-12-05 10:49 on a machine with a 119/s no-activity ceiling).
 */
export const THROUGHPUT_INFLIGHT = 200;
/**
 * In the batch run shape: at 200 the batch shape met the claim ceiling itself (2 accounts × 200
 * per 1 s tick; 391 checks/s "limited by inflight" with a core idle, 10:36 the same day), and 600
 * cards in flight are 12 runs of 50. A deployment on the batch shape raises the account's limit the
 * same way (docs/capacity.md). On a machine with a quarter of that ceiling, 1000 made the batch
 * shape slower (146 against 201 checks/s, workflow task timeouts; 093e968).
 */
export const THROUGHPUT_BATCH_INFLIGHT = 600;

/** The in-flight limit the throughput workload's accounts get in a run shape. */
export function throughputInflight(runShape: RunShape): number {
  return runShape === 'batch' ? THROUGHPUT_BATCH_INFLIGHT : THROUGHPUT_INFLIGHT;
}

const SHAPE_TYPES = {
  single: { card_status: 'status' },
  three: { card_status: 'status', carddata: 'data', realname: 'realname' },
} as const;

/** Gateway types per execution of a shape. */
export function typesPerExecution(shape: Shape): number {
  return Object.keys(SHAPE_TYPES[shape]).length;
}

export function throughputSpecs(prefix: string, shape: Shape = 'single', runShape: RunShape = 'card'): AccountSpec[] {
  const typeGroups = SHAPE_TYPES[shape];
  const groups = [...new Set(Object.values(typeGroups))];
  return Array.from({ length: THROUGHPUT_ACCOUNTS }, (_, i) => ({
    name: `${prefix}${i + 1}`,
    qps: Object.fromEntries(groups.map((group) => [group, THROUGHPUT_QPS])),
    typeGroups,
    cards: THROUGHPUT_CARDS_PER_ACCOUNT,
    intervalsSec: Object.fromEntries(Object.keys(typeGroups).map((type) => [type, THROUGHPUT_INTERVAL_SEC])),
    latencyMs: THROUGHPUT_LATENCY,
    inflightLimit: throughputInflight(runShape),
    // Real-name control on: the realname type counts against the claim budget like the others.
    realnameControl: shape === 'three',
  }));
}

export const THROUGHPUT_CONFIG = {
  accounts: THROUGHPUT_ACCOUNTS,
  cardsPerAccount: THROUGHPUT_CARDS_PER_ACCOUNT,
  intervalSec: THROUGHPUT_INTERVAL_SEC,
  qps: THROUGHPUT_QPS,
  latencyMs: THROUGHPUT_LATENCY,
  inflightLimit: { card: THROUGHPUT_INFLIGHT, batch: THROUGHPUT_BATCH_INFLIGHT },
};
