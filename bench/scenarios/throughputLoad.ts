/**
 * The workload shared by throughput, ceiling and direct: budgets far above what one machine can
 * execute and a near-zero gateway latency, with every card due again one second after its check,
 * so the backlog never drains and the figure is what the executor sustains, not what is offered.
 * Shape `three`: every card is polled for card_status, carddata and realname (one group each),
 * so an execution makes three gateway calls — the backlog keeps all three due at every claim.
 */
import type { AccountSpec } from '../lib/seed.js';
import type { Shape } from '../lib/options.js';

export const THROUGHPUT_ACCOUNTS = 2;
export const THROUGHPUT_CARDS_PER_ACCOUNT = 1500;
export const THROUGHPUT_INTERVAL_SEC = 1;
export const THROUGHPUT_QPS = 5000;
export const THROUGHPUT_LATENCY = { p50: 1, p99: 3 };
/**
 * The accounts' inflight limit (the production default is 200 too). Not raised for the batch shape,
 * though a batch rate near 2 × 200 per tick looks like the claim ceiling: at 1000 the batch shape
 * ran slower (146 against 201 checks/s, start lag 2–4 s, workflow task timeouts; 093e968), the
 * worker process already at a full core, and the card shape's child starts flooded the engine
 * (679 leases expired in `ceiling`).
 */
export const THROUGHPUT_INFLIGHT = 200;

const SHAPE_TYPES = {
  single: { card_status: 'status' },
  three: { card_status: 'status', carddata: 'data', realname: 'realname' },
} as const;

/** Gateway types per execution of a shape. */
export function typesPerExecution(shape: Shape): number {
  return Object.keys(SHAPE_TYPES[shape]).length;
}

export function throughputSpecs(prefix: string, shape: Shape = 'single'): AccountSpec[] {
  const typeGroups = SHAPE_TYPES[shape];
  const groups = [...new Set(Object.values(typeGroups))];
  return Array.from({ length: THROUGHPUT_ACCOUNTS }, (_, i) => ({
    name: `${prefix}${i + 1}`,
    qps: Object.fromEntries(groups.map((group) => [group, THROUGHPUT_QPS])),
    typeGroups,
    cards: THROUGHPUT_CARDS_PER_ACCOUNT,
    intervalsSec: Object.fromEntries(Object.keys(typeGroups).map((type) => [type, THROUGHPUT_INTERVAL_SEC])),
    latencyMs: THROUGHPUT_LATENCY,
    inflightLimit: THROUGHPUT_INFLIGHT,
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
  inflightLimit: THROUGHPUT_INFLIGHT,
};
