/**
 * Prometheus metrics recorded by activities. One registry per process; the API serves
 * it at /metrics and each worker process can expose its own.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { LimitingFactor } from '../common/inflightControl.js';

export interface ActivityMetrics {
  gatewayCall(carrierId: string, type: string, outcome: string, latencyMs: number): void;
  deferral(carrierId: string, type: string, reason: string): void;
  check(carrierId: string, type: string, outcome: string): void;
  lateness(carrierId: string, latenessMs: number): void;
  priorityLatency(carrierId: string, latencyMs: number): void;
  claimRound(carrierId: string, claimed: number, expired: number, running: number, lanes: { priority: number; normal: number }): void;
  /** One claim round's orchestration view: what limited it, the limit used, the starts since the last round. */
  orchestration(carrierId: string, round: { limitedBy: LimitingFactor; inflightLimit: number; starts: number; lagSumMs: number }): void;
}

const LIMITING_FACTORS: readonly LimitingFactor[] = ['none', 'budget', 'inflight', 'orchestration', 'ingest'];

export function createActivityMetrics(registry: Registry): ActivityMetrics {
  const gatewayLatency = new Histogram({
    name: 'cardpoller_gateway_latency_seconds',
    help: 'Gateway call latency by account, type and outcome',
    labelNames: ['carrier', 'type', 'outcome'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const deferrals = new Counter({
    name: 'cardpoller_rate_limit_deferrals_total',
    help: 'Rate-limit deferrals',
    labelNames: ['carrier', 'type', 'reason'],
    registers: [registry],
  });
  const checks = new Counter({
    name: 'cardpoller_checks_total',
    help: 'Checks by account, type and outcome',
    labelNames: ['carrier', 'type', 'outcome'],
    registers: [registry],
  });
  const lateness = new Histogram({
    name: 'cardpoller_lateness_seconds',
    help: 'Execution start minus earliest due',
    labelNames: ['carrier'],
    buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300],
    registers: [registry],
  });
  const priority = new Histogram({
    name: 'cardpoller_priority_latency_seconds',
    help: 'Request-check to execution start',
    labelNames: ['carrier'],
    buckets: [0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30],
    registers: [registry],
  });
  const leaseExpiries = new Counter({
    name: 'cardpoller_lease_expiries_total',
    help: 'Claims reclaimed after their lease expired',
    labelNames: ['carrier'],
    registers: [registry],
  });
  const claimed = new Counter({ name: 'cardpoller_claimed_total', help: 'Cards claimed', labelNames: ['carrier'], registers: [registry] });
  const inflight = new Gauge({ name: 'cardpoller_inflight', help: 'Claims in flight', labelNames: ['carrier'], registers: [registry] });
  const depth = new Gauge({ name: 'cardpoller_queue_depth', help: 'Cards per lane', labelNames: ['carrier', 'lane'], registers: [registry] });
  const limitedBy = new Gauge({
    name: 'cardpoller_limited_by',
    help: 'What limited the last claim round (1 for the factor, 0 for the others)',
    labelNames: ['carrier', 'factor'],
    registers: [registry],
  });
  const inflightLimit = new Gauge({
    name: 'cardpoller_inflight_limit',
    help: 'In-flight limit of the last claim round (adaptive, ≤ configured)',
    labelNames: ['carrier'],
    registers: [registry],
  });
  const starts = new Counter({ name: 'cardpoller_execution_starts_total', help: 'Card executions started', labelNames: ['carrier'], registers: [registry] });
  const startLag = new Counter({
    name: 'cardpoller_execution_start_lag_seconds_total',
    help: 'Summed start lag (run created → first workflow task); divide by starts for the mean',
    labelNames: ['carrier'],
    registers: [registry],
  });
  return {
    gatewayCall: (carrier, type, outcome, ms) => gatewayLatency.observe({ carrier, type, outcome }, ms / 1000),
    deferral: (carrier, type, reason) => deferrals.inc({ carrier, type, reason }),
    check: (carrier, type, outcome) => checks.inc({ carrier, type, outcome }),
    lateness: (carrier, ms) => lateness.observe({ carrier }, Math.max(0, ms) / 1000),
    priorityLatency: (carrier, ms) => priority.observe({ carrier }, Math.max(0, ms) / 1000),
    claimRound: (carrier, count, expired, running, lanes) => {
      claimed.inc({ carrier }, count);
      if (expired > 0) leaseExpiries.inc({ carrier }, expired);
      inflight.set({ carrier }, running);
      depth.set({ carrier, lane: 'priority' }, lanes.priority);
      depth.set({ carrier, lane: 'normal' }, lanes.normal);
    },
    orchestration: (carrier, round) => {
      for (const factor of LIMITING_FACTORS) limitedBy.set({ carrier, factor }, factor === round.limitedBy ? 1 : 0);
      inflightLimit.set({ carrier }, round.inflightLimit);
      starts.inc({ carrier }, round.starts);
      startLag.inc({ carrier }, round.lagSumMs / 1000);
    },
  };
}
