/**
 * The load shared by steady and priority: two accounts whose cards ask for a share of what is
 * feasible — min(budget, measured orchestration capacity), the capacity split over the accounts
 * by budget as the engine shares it (cards = load × feasible QPS × interval, one card_status call
 * per card per interval). steady scales the budgets up to the capacity when they are below it, so
 * its load is a share of what the run shape itself sustains, not of the budgets.
 */
import type { AccountSpec } from '../lib/seed.js';
import { round } from '../lib/stats.js';

export const STEADY_INTERVAL_SEC = 10;
export const STEADY_LOAD = 0.7;
export const STEADY_BUDGETS: readonly { readonly name: string; readonly qps: number }[] = [
  { name: 'st10', qps: 10 },
  { name: 'st20', qps: 20 },
];

export interface FeasibleLoad {
  /** The accounts' budgets: STEADY_BUDGETS, or scaled up to the capacity (same proportions) when asked. */
  readonly budgets: readonly { readonly name: string; readonly qps: number }[];
  /** Factor applied to STEADY_BUDGETS (1 = as defined). */
  readonly budgetScale: number;
  readonly budgetQps: number;
  /** min(budget, capacity) in executions (= calls) per second. */
  readonly feasibleQps: number;
  /** Share of each budget that is feasible (1 = the budget is the limit). */
  readonly feasibleShare: number;
  readonly limitedBy: 'budget' | 'orchestration capacity';
}

export function feasibleLoad(capacityPerSecond: number, options: { readonly scaleBudgetsToCapacity?: boolean } = {}): FeasibleLoad {
  const defined = STEADY_BUDGETS.reduce((n, b) => n + b.qps, 0);
  const budgetScale = options.scaleBudgetsToCapacity && capacityPerSecond > defined ? capacityPerSecond / defined : 1;
  // Rounded up: the scaled budgets never fall below the capacity they are scaled to.
  const budgets = STEADY_BUDGETS.map((b) => ({ name: b.name, qps: Math.ceil(b.qps * budgetScale) }));
  const budgetQps = budgets.reduce((n, b) => n + b.qps, 0);
  const feasibleShare = Math.min(1, capacityPerSecond / budgetQps);
  return {
    budgets,
    budgetScale: round(budgetScale, 3),
    budgetQps,
    feasibleQps: round(budgetQps * feasibleShare, 1),
    feasibleShare: round(feasibleShare, 3),
    limitedBy: feasibleShare < 1 ? 'orchestration capacity' : 'budget',
  };
}

export function steadySpecs(prefix: string, feasible: FeasibleLoad, load: number = STEADY_LOAD): AccountSpec[] {
  return feasible.budgets.map((budget) => ({
    name: `${prefix}${budget.name}`,
    qps: { status: budget.qps },
    typeGroups: { card_status: 'status' },
    cards: Math.max(1, Math.round(load * budget.qps * feasible.feasibleShare * STEADY_INTERVAL_SEC)),
    intervalsSec: { card_status: STEADY_INTERVAL_SEC },
    latencyMs: { p50: 5, p99: 20 },
  }));
}
