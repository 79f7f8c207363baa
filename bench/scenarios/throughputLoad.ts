/**
 * The workload shared by throughput and direct: budgets far above what one machine can execute
 * and a near-zero gateway latency, with every card due again one second after its check, so the
 * backlog never drains and the figure is what the executor sustains, not what is offered.
 */
import type { AccountSpec } from '../lib/seed.js';

export const THROUGHPUT_ACCOUNTS = 2;
export const THROUGHPUT_CARDS_PER_ACCOUNT = 1500;
export const THROUGHPUT_INTERVAL_SEC = 1;
export const THROUGHPUT_QPS = 5000;
export const THROUGHPUT_LATENCY = { p50: 1, p99: 3 };
/** The accounts' inflight limit (the production default is 200 too). */
export const THROUGHPUT_INFLIGHT = 200;

export function throughputSpecs(prefix: string): AccountSpec[] {
  return Array.from({ length: THROUGHPUT_ACCOUNTS }, (_, i) => ({
    name: `${prefix}${i + 1}`,
    qps: { status: THROUGHPUT_QPS },
    typeGroups: { card_status: 'status' },
    cards: THROUGHPUT_CARDS_PER_ACCOUNT,
    intervalsSec: { card_status: THROUGHPUT_INTERVAL_SEC },
    latencyMs: THROUGHPUT_LATENCY,
    inflightLimit: THROUGHPUT_INFLIGHT,
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
