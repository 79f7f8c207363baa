/**
 * Prometheus metrics recorded by activities. One registry per process; the API serves
 * it at /metrics and each worker process can expose its own.
 *
 * Per-account gauges describe the claim rounds this process ran. A scheduler moves between control
 * workers (a restart, a cache eviction), so a process drops an account's gauges once it has run no
 * round of it for {@link ROUND_GAUGES_STALE_MS}: a query over all processes sees the current values
 * only, not the last ones of a process that stopped scheduling the account.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { LimitingFactor } from '../workflow-safe/inflightControl.js';

/** A group's budget as a claim round saw it. */
export interface GroupRate {
  readonly name: string;
  readonly qpsConfigured: number;
  readonly qpsEffective: number;
}

export interface ActivityMetrics {
  /** `group`: the type's rate-limit group on the account ('' when the type is not budgeted). */
  gatewayCall(carrierId: string, group: string, type: string, outcome: string, latencyMs: number): void;
  deferral(carrierId: string, type: string, reason: string): void;
  check(carrierId: string, type: string, outcome: string): void;
  lateness(carrierId: string, latenessMs: number): void;
  priorityLatency(carrierId: string, latencyMs: number): void;
  /** One execution started: time from its claim (or the run's creation) to its first workflow task. */
  executionStart(carrierId: string, startLagMs: number): void;
  /** The account's scheduler ran a claim round here (whatever it claimed, also in legacy mode). */
  schedulerRound(carrierId: string): void;
  claimRound(carrierId: string, claimed: number, expired: number, running: number, lanes: { priority: number; normal: number }): void;
  /** One claim round's orchestration view: what limited it, the limit used, the groups' budgets. */
  orchestration(carrierId: string, round: { limitedBy: LimitingFactor; inflightLimit: number; groups: readonly GroupRate[] }): void;
  /** The accounts pollingControl keeps a scheduler running for, as just listed. */
  enabledAccounts(carrierIds: readonly string[]): void;
}

const LIMITING_FACTORS: readonly LimitingFactor[] = ['none', 'budget', 'inflight', 'orchestration', 'ingest'];

/** An account's round gauges are dropped from a process that has run none of its rounds for this long. */
export const ROUND_GAUGES_STALE_MS = 120_000;
/** The enabled-account list is dropped when not listed again for this long (pollingControl lists every minute). */
export const ENABLED_LIST_STALE_MS = 300_000;

export interface ActivityMetricsOptions {
  readonly now?: () => number;
}

export function createActivityMetrics(registry: Registry, options: ActivityMetricsOptions = {}): ActivityMetrics {
  const now = options.now ?? Date.now;
  /** carrier → when this process last ran one of its rounds, and the groups it set gauges for. */
  const rounds = new Map<string, { at: number; groups: Set<string> }>();
  let enabledListedAt: number | undefined;

  const gatewayLatency = new Histogram({
    name: 'cardpoller_gateway_latency_seconds',
    help: 'Gateway call latency by account, rate-limit group, type and outcome (success or the error class)',
    labelNames: ['carrier', 'group', 'type', 'outcome'],
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
  const startLag = new Histogram({
    name: 'cardpoller_execution_start_lag_seconds',
    help: 'Execution start lag: claim (or run creation) to the first workflow task; how far the engine is behind',
    labelNames: ['carrier'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
    registers: [registry],
  });
  const leaseExpiries = new Counter({
    name: 'cardpoller_lease_expiries_total',
    help: 'Claims reclaimed after their lease expired',
    labelNames: ['carrier'],
    registers: [registry],
  });
  const claimed = new Counter({ name: 'cardpoller_claimed_total', help: 'Cards claimed', labelNames: ['carrier'], registers: [registry] });
  const lastRound = new Gauge({
    name: 'cardpoller_scheduler_last_round_timestamp_seconds',
    help: "Unix time of the account's last claim round in this process (take the max over processes)",
    labelNames: ['carrier'],
    registers: [registry],
  });
  const enabled = new Gauge({
    name: 'cardpoller_account_enabled',
    help: 'Accounts pollingControl keeps a scheduler running for (1), as last listed by this process',
    labelNames: ['carrier'],
    registers: [registry],
    collect() {
      if (enabledListedAt !== undefined && now() - enabledListedAt > ENABLED_LIST_STALE_MS) {
        enabled.reset();
        enabledListedAt = undefined;
      }
    },
  });
  // The claim-round gauges below are pruned together (see the module comment).
  const collect = (): void => pruneStaleRounds();
  const inflight = new Gauge({ name: 'cardpoller_inflight', help: 'Claims in flight', labelNames: ['carrier'], registers: [registry], collect });
  const depth = new Gauge({ name: 'cardpoller_queue_depth', help: 'Cards per lane', labelNames: ['carrier', 'lane'], registers: [registry], collect });
  const limitedBy = new Gauge({
    name: 'cardpoller_limited_by',
    help: 'What limited the last claim round (1 for the factor, 0 for the others)',
    labelNames: ['carrier', 'factor'],
    registers: [registry],
    collect,
  });
  const inflightLimit = new Gauge({
    name: 'cardpoller_inflight_limit',
    help: 'In-flight limit of the last claim round (adaptive, ≤ configured)',
    labelNames: ['carrier'],
    registers: [registry],
    collect,
  });
  const qpsConfigured = new Gauge({
    name: 'cardpoller_rate_limit_qps',
    help: "A rate-limit group's configured budget, calls per second",
    labelNames: ['carrier', 'group'],
    registers: [registry],
    collect,
  });
  const qpsEffective = new Gauge({
    name: 'cardpoller_rate_limit_effective_qps',
    help: "A rate-limit group's budget after the carrier's pushback, calls per second",
    labelNames: ['carrier', 'group'],
    registers: [registry],
    collect,
  });

  function pruneStaleRounds(): void {
    const at = now();
    for (const [carrier, round] of rounds) {
      if (at - round.at <= ROUND_GAUGES_STALE_MS) continue;
      rounds.delete(carrier);
      inflight.remove({ carrier });
      inflightLimit.remove({ carrier });
      for (const lane of ['priority', 'normal']) depth.remove({ carrier, lane });
      for (const factor of LIMITING_FACTORS) limitedBy.remove({ carrier, factor });
      for (const group of round.groups) {
        qpsConfigured.remove({ carrier, group });
        qpsEffective.remove({ carrier, group });
      }
    }
  }

  function touched(carrier: string): { at: number; groups: Set<string> } {
    const round = rounds.get(carrier) ?? { at: 0, groups: new Set<string>() };
    round.at = now();
    rounds.set(carrier, round);
    return round;
  }

  return {
    gatewayCall: (carrier, group, type, outcome, ms) => gatewayLatency.observe({ carrier, group, type, outcome }, ms / 1000),
    deferral: (carrier, type, reason) => deferrals.inc({ carrier, type, reason }),
    check: (carrier, type, outcome) => checks.inc({ carrier, type, outcome }),
    lateness: (carrier, ms) => lateness.observe({ carrier }, Math.max(0, ms) / 1000),
    priorityLatency: (carrier, ms) => priority.observe({ carrier }, Math.max(0, ms) / 1000),
    executionStart: (carrier, ms) => startLag.observe({ carrier }, Math.max(0, ms) / 1000),
    schedulerRound: (carrier) => lastRound.set({ carrier }, now() / 1000),
    claimRound: (carrier, count, expired, running, lanes) => {
      touched(carrier);
      claimed.inc({ carrier }, count);
      if (expired > 0) leaseExpiries.inc({ carrier }, expired);
      inflight.set({ carrier }, running);
      depth.set({ carrier, lane: 'priority' }, lanes.priority);
      depth.set({ carrier, lane: 'normal' }, lanes.normal);
    },
    orchestration: (carrier, round) => {
      const seen = touched(carrier);
      for (const factor of LIMITING_FACTORS) limitedBy.set({ carrier, factor }, factor === round.limitedBy ? 1 : 0);
      inflightLimit.set({ carrier }, round.inflightLimit);
      for (const group of round.groups) {
        seen.groups.add(group.name);
        qpsConfigured.set({ carrier, group: group.name }, group.qpsConfigured);
        qpsEffective.set({ carrier, group: group.name }, group.qpsEffective);
      }
    },
    enabledAccounts: (carrierIds) => {
      enabled.reset();
      for (const carrier of carrierIds) enabled.set({ carrier }, 1);
      enabledListedAt = now();
    },
  };
}
