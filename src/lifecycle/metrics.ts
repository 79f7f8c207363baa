/**
 * Prometheus metrics of the lifecycle's way to Redis: what the outbox relay applied and failed to
 * apply, the rows waiting, and what the periodic reconcile found wrong and repaired, by kind.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type pg from 'pg';
import { outboxBacklog } from './outboxRows.js';

/** What the reconcile repaired (see src/lifecycle/reconcile.ts). */
export const REPAIR_KINDS = ['missing', 'not_polled', 'other_account', 'types'] as const;
export type RepairKind = (typeof REPAIR_KINDS)[number];

export interface LifecycleMetrics {
  outboxApplied(rows: number): void;
  outboxFailed(rows: number): void;
  repaired(kind: RepairKind, cards: number): void;
}

/** `pool`: the backlog gauges read the outbox table when scraped (one small query). */
export function createLifecycleMetrics(registry: Registry, pool?: pg.Pool): LifecycleMetrics {
  const applied = new Counter({
    name: 'cardpoller_lifecycle_outbox_applied_total',
    help: 'Lifecycle outbox rows the relay applied to Redis',
    registers: [registry],
  });
  const failed = new Counter({
    name: 'cardpoller_lifecycle_outbox_failures_total',
    help: 'Lifecycle outbox rows whose attempt failed (tried again after a backoff)',
    registers: [registry],
  });
  const repairs = new Counter({
    name: 'cardpoller_lifecycle_repairs_total',
    help: 'Cards the lifecycle reconcile found out of line with PostgreSQL and repaired, by kind',
    labelNames: ['kind'],
    registers: [registry],
  });
  for (const kind of REPAIR_KINDS) repairs.inc({ kind }, 0);
  if (pool) {
    let backlog: Promise<{ pending: number; oldestSec: number }> | undefined;
    // One query per scrape for both gauges (each gauge's collect asks; the first one reads).
    const read = (): Promise<{ pending: number; oldestSec: number }> => {
      backlog ??= outboxBacklog(pool).finally(() => setTimeout(() => (backlog = undefined), 100).unref());
      return backlog;
    };
    new Gauge({
      name: 'cardpoller_lifecycle_outbox_pending',
      help: 'Lifecycle outbox rows not yet applied to Redis',
      registers: [registry],
      async collect() {
        this.set((await read().catch(() => ({ pending: 0, oldestSec: 0 }))).pending);
      },
    });
    new Gauge({
      name: 'cardpoller_lifecycle_outbox_oldest_seconds',
      help: 'Age of the oldest lifecycle outbox row (0 when none)',
      registers: [registry],
      async collect() {
        this.set((await read().catch(() => ({ pending: 0, oldestSec: 0 }))).oldestSec);
      },
    });
  }
  return {
    outboxApplied: (rows) => applied.inc(rows),
    outboxFailed: (rows) => failed.inc(rows),
    repaired: (kind, cards) => repairs.inc({ kind }, cards),
  };
}
