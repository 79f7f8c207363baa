/**
 * Due-time arithmetic (docs/design.md, 'Finish rules' and 'Lifecycle'). Pure functions (randomness
 * is passed in), so workflows, activities and tests share one definition.
 */
import { CHECK_TYPES, type CheckType } from './checkTypes.js';
import type { DueState } from '../redis/dueState.js';

/**
 * The types an execution runs, in `order`: due at `now`, still polled (an interval), and not
 * deferred by the claim (their group's budget was closed that round; they stay due for the next
 * one). `earliest` is the earliest due among them (`now` when none), for lateness. A due of a type
 * without an interval is not run: the execution's finish drops it (planFinish), so it never keeps
 * the card due with nothing to run.
 */
export function dueTypes(
  state: DueState | null,
  intervals: Partial<Record<CheckType, number>>,
  now: number,
  order: readonly CheckType[] = CHECK_TYPES,
): { types: CheckType[]; earliest: number } {
  const types: CheckType[] = [];
  let earliest = Number.POSITIVE_INFINITY;
  for (const type of order) {
    const due = state?.types[type].due ?? null;
    if (due === null || due > now || intervals[type] === undefined || state?.deferred.includes(type)) continue;
    types.push(type);
    earliest = Math.min(earliest, due);
  }
  return { types, earliest: Number.isFinite(earliest) ? earliest : now };
}

/** Next due after a success: one interval after the previous due, keeping the card's phase. */
export function nextDueAfterSuccess(previousDue: number | undefined, intervalMs: number, now: number): number {
  if (previousDue === undefined || !Number.isFinite(previousDue)) return now + intervalMs;
  let next = previousDue + intervalMs;
  // Never in the past: skip the slots that were missed, still on the same phase.
  if (next <= now) next += Math.ceil((now - next + 1) / intervalMs) * intervalMs;
  return next;
}

export interface BackoffPolicy {
  /** Delay after the first failure. */
  readonly baseMs: number;
  /** Upper bound; the type's interval (a failing card is never checked less often than a healthy one). */
  readonly capMs: number;
}

/**
 * Delay before retrying a failing type: exponential in the failure count from the account's base,
 * capped, with "equal jitter" (half fixed, half random) so failing cards of one account don't
 * retry in lock-step while the delay still grows.
 */
export function backoffDelay(failCount: number, policy: BackoffPolicy, random: () => number): number {
  const exponent = Math.min(Math.max(failCount - 1, 0), 30);
  const raw = Math.min(policy.baseMs * 2 ** exponent, policy.capMs);
  return Math.max(1, Math.round(raw / 2 + (raw / 2) * random()));
}

/** Jitter for a card that enters polling: [0, max(interval/10, 2 s)) (docs/design.md, 'Lifecycle'). */
export function initialJitter(intervalMs: number, random: () => number): number {
  return Math.floor(Math.max(intervalMs / 10, 2000) * random());
}

/** How soon a rate-limit deferral is due again: soon, spread over a second to avoid a thundering herd. */
export function deferralDelay(random: () => number): number {
  return 1000 + Math.floor(1000 * random());
}

export interface ConfirmationState {
  /** Remaining delays in seconds, next first. */
  readonly delaysSec: readonly number[];
  readonly expected: string;
}

export type ConfirmationStep =
  /** The expected state was seen: confirmation ends, the normal interval applies. */
  | { readonly kind: 'confirmed' }
  /** Not yet: check again after `delayMs`; `remaining` is what is left after this one. */
  | { readonly kind: 'again'; readonly delayMs: number; readonly remaining: readonly number[] }
  /** The sequence ran out without seeing it: back to the interval, and the miss is recorded. */
  | { readonly kind: 'exhausted' };

export function confirmationStep(state: ConfirmationState, observed: string | undefined): ConfirmationStep {
  if (observed !== undefined && observed === state.expected) return { kind: 'confirmed' };
  const [next, ...remaining] = state.delaysSec;
  if (next === undefined) return { kind: 'exhausted' };
  return { kind: 'again', delayMs: next * 1000, remaining };
}
