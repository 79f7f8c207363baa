/**
 * The lifecycle outbox relay: applies to Redis the rows that lifecycle events left behind (their
 * process died after the commit, or Redis failed), until each succeeds — at least once, in any
 * order (each apply derives what to write from PostgreSQL: src/lifecycle/apply.ts). A row is
 * deleted after its apply succeeded; a failed attempt waits a doubling delay, capped. Relays in
 * several processes share the rows (each claims its rows with a lease).
 */
import { applyRefs, type ApplyDeps } from './apply.js';
import type { LifecycleMetrics } from './metrics.js';
import { claimOutboxRows, deleteOutboxRows, postponeOutboxRows } from './outboxRows.js';
import { loadPollingContext } from './pollingContext.js';

export interface RelayOptions {
  /** Rows taken per attempt. */
  readonly batchSize: number;
  /** First delay after a failed attempt; doubles per attempt of the row up to `retryMaxMs`. */
  readonly retryBaseMs: number;
  readonly retryMaxMs: number;
  /** How long claimed rows are left alone by other relays (an attempt that takes longer may be repeated, harmlessly). */
  readonly leaseMs?: number;
}

export interface RelayPass {
  readonly claimed: number;
  readonly applied: number;
  readonly failed: number;
  /** The failure of the attempt, when it failed. */
  readonly error?: string;
}

const DEFAULT_LEASE_MS = 60_000;

export function retryDelayMs(attempts: number, options: Pick<RelayOptions, 'retryBaseMs' | 'retryMaxMs'>): number {
  return Math.min(options.retryBaseMs * 2 ** Math.min(Math.max(attempts - 1, 0), 30), options.retryMaxMs);
}

/** One attempt on up to `batchSize` due rows. Throws only when PostgreSQL fails (the rows then come back after their lease). */
export async function relayOutboxOnce(deps: ApplyDeps, options: RelayOptions, metrics?: LifecycleMetrics): Promise<RelayPass> {
  const rows = await claimOutboxRows(deps.pool, options.batchSize, options.leaseMs ?? DEFAULT_LEASE_MS);
  if (rows.length === 0) return { claimed: 0, applied: 0, failed: 0 };
  let error: unknown;
  try {
    const context = await loadPollingContext(deps.pool);
    if (await applyRefs(deps, context, rows)) {
      await deleteOutboxRows(
        deps.pool,
        rows.map((row) => row.id),
      );
      metrics?.outboxApplied(rows.length);
      return { claimed: rows.length, applied: rows.length, failed: 0 };
    }
    error = new Error('the cards kept changing while they were applied');
  } catch (caught) {
    error = caught;
  }
  const message = error instanceof Error ? error.message : String(error);
  await postponeOutboxRows(
    deps.pool,
    rows.map((row) => ({ id: row.id, delayMs: retryDelayMs(row.attempts, options) })),
    message,
  );
  metrics?.outboxFailed(rows.length);
  return { claimed: rows.length, applied: 0, failed: rows.length, error: message };
}
