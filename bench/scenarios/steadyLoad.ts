/**
 * The load shared by steady and priority: two accounts whose cards ask for ~70 % of their budget
 * (cards = 0.7 × QPS × interval, one card_status call per card per interval).
 */
import type { AccountSpec } from '../lib/seed.js';

export const STEADY_INTERVAL_SEC = 10;
export const STEADY_LOAD = 0.7;
export const STEADY_BUDGETS: readonly { readonly name: string; readonly qps: number }[] = [
  { name: 'st10', qps: 10 },
  { name: 'st20', qps: 20 },
];

export function steadySpecs(prefix: string): AccountSpec[] {
  return STEADY_BUDGETS.map((budget) => ({
    name: `${prefix}${budget.name}`,
    qps: { status: budget.qps },
    typeGroups: { card_status: 'status' },
    cards: Math.round(STEADY_LOAD * budget.qps * STEADY_INTERVAL_SEC),
    intervalsSec: { card_status: STEADY_INTERVAL_SEC },
    latencyMs: { p50: 5, p99: 20 },
  }));
}
