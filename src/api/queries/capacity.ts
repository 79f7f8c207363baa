/**
 * Capacity estimate of an account (`capacity` in its status): the QPS its configured intervals
 * need per rate-limit group against the configured budget. Pure: the inputs are read elsewhere.
 */
import { GATEWAY_CHECK_TYPES } from '../../workflow-safe/checkTypes.js';
import type { Carrier } from '../../domain/carrier.js';
import type { CardStatus } from '../../domain/card.js';
import type { IntervalResolver } from '../../domain/pollingConfig.js';

export interface Capacity {
  readonly requiredQps: Record<string, number>;
  readonly budgetQps: Record<string, number>;
  /**
   * Executions per second the intervals need at most (every polled type, gateway or local, run on
   * its own; executions that find several types due at once need fewer).
   */
  readonly requiredExecutionsPerSec: number;
  /** Executions per second the engine sustained for this account while it was the limit; null until measured. */
  readonly orchestrationCapacityPerSec: number | null;
  /**
   * How much longer than configured the intervals really are when the budget or the engine is
   * short; ≥ 1.
   */
  readonly stretchFactor: number;
}

const round3 = (value: number): number => Math.round(value * 1000) / 1000;

/**
 * Σ over polled cards of 1/interval for each gateway type mapped to a group. Realname counts only
 * with real-name control (otherwise the carrier does not charge it to the budget); types mapped to
 * no group are not rate-limited and need no budget.
 */
export function capacityOf(
  carrier: Carrier,
  polled: readonly { status: CardStatus; count: number }[],
  intervals: IntervalResolver,
  orchestrationCapacityPerSec: number | null = null,
): Capacity {
  const required: Record<string, number> = Object.fromEntries(carrier.groups.map((group) => [group.name, 0]));
  let executions = 0;
  for (const { status, count } of polled) {
    const perType = intervals.resolve({ carrierId: carrier.id, status });
    for (const seconds of Object.values(perType)) if (seconds !== undefined && seconds > 0) executions += count / seconds;
    for (const type of GATEWAY_CHECK_TYPES) {
      if (type === 'realname' && !carrier.realnameControl) continue;
      const seconds = perType[type];
      const group = carrier.typeGroups[type];
      if (seconds === undefined || group === undefined) continue;
      required[group] = (required[group] ?? 0) + count / seconds;
    }
  }
  const budget: Record<string, number> = Object.fromEntries(carrier.groups.map((group) => [group.name, group.qps]));
  let stretch = 1;
  for (const [group, need] of Object.entries(required)) {
    // Group QPS is validated > 0, so a mapped group always has a budget to divide by.
    const have = budget[group];
    if (have !== undefined && have > 0) stretch = Math.max(stretch, need / have);
  }
  if (orchestrationCapacityPerSec !== null && orchestrationCapacityPerSec > 0) stretch = Math.max(stretch, executions / orchestrationCapacityPerSec);
  return {
    requiredQps: Object.fromEntries(Object.entries(required).map(([group, qps]) => [group, round3(qps)])),
    budgetQps: budget,
    requiredExecutionsPerSec: round3(executions),
    orchestrationCapacityPerSec,
    stretchFactor: round3(stretch),
  };
}
