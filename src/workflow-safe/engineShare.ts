/**
 * Accounts sharing a saturated engine in proportion to their budgets (docs/design.md §6).
 *
 * Each account's adaptive in-flight limit reacts to its own start lag. With client starts every
 * account sees the same queue and AIMD with budget-weighted steps shares the engine by budget; with
 * child starts each account's runs also queue in its own scheduler's history, so the signals
 * differ and the shares drift (overload bench, child mode: 2.19 / 1.24 / 0.58 of the budget shares
 * for budgets 1 : 2 : 4). So every claim round publishes the account's execution rate beside the
 * others' (Redis, `poll:meta:engine-shares`) and learns its fair rate: the engine's current
 * throughput split by budget among the accounts that want more than they get (weighted max-min:
 * an account content with less leaves the rest to the others). The in-flight controller then cuts
 * an account running well above its fair rate and stops its growth near it
 * (src/workflow-safe/inflightControl.ts).
 */

/** One account's entry in the shared table, written by its claim round. */
export interface EngineShareEntry {
  readonly carrierId: string;
  /** Smoothed executions started per second (the scheduler's in-flight controller). */
  readonly startsPerSec: number;
  /** The account's budget (QPS): its weight. */
  readonly weight: number;
  /** Its last round was held back by the engine (`orchestration`): it would run more if it could. */
  readonly wanting: boolean;
  /** When written (ms, the claim activity's clock). */
  readonly at: number;
}

/** Entries older than this are gone accounts (disabled, stopped): left out. */
export const ENGINE_SHARE_FRESH_MS = 15_000;

/**
 * The fair execution rate of `carrierId`, or null when the engine is not what holds anyone back
 * (no fresh entry is wanting) or the account shares it with nobody.
 */
export function fairEngineRate(entries: readonly EngineShareEntry[], carrierId: string, now: number): number | null {
  const fresh = entries.filter((entry) => now - entry.at <= ENGINE_SHARE_FRESH_MS && entry.weight > 0);
  if (fresh.length < 2 || !fresh.some((entry) => entry.wanting) || !fresh.some((entry) => entry.carrierId === carrierId)) return null;
  let capacity = fresh.reduce((sum, entry) => sum + Math.max(0, entry.startsPerSec), 0);
  let active = fresh;
  // Water-filling: an account that wants no more and runs below its share keeps what it runs; the
  // rest is shared again among the others, until every remaining account is at or above its share.
  for (;;) {
    const weights = active.reduce((sum, entry) => sum + entry.weight, 0);
    const content = active.filter((entry) => !entry.wanting && entry.startsPerSec < (capacity * entry.weight) / weights);
    if (content.length === 0 || content.length === active.length) {
      const self = active.find((entry) => entry.carrierId === carrierId);
      if (self === undefined) return null;
      return (capacity * self.weight) / weights;
    }
    if (content.some((entry) => entry.carrierId === carrierId)) return null;
    capacity -= content.reduce((sum, entry) => sum + Math.max(0, entry.startsPerSec), 0);
    active = active.filter((entry) => !content.includes(entry));
  }
}
