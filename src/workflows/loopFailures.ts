/**
 * Failure bookkeeping of a long-running loop (pollingControl, carrierScheduler): the loop catches
 * a failed activity instead of failing the workflow, and asks this how long to back off. Workflow
 * code: time comes from the workflow sandbox; the failure counter goes to the SDK's metrics.
 */
import { ActivityFailure, ApplicationFailure, log, metricMeter } from '@temporalio/workflow';
import type { LoopFailure } from '../workflow-safe/loopStatus.js';

const MAX_BACKOFF_MS = 30_000;

export interface LoopFailures {
  /** `backoff`: the loop's own step failed (its next attempt waits); others are only reported. */
  record(activity: string, error: unknown, options?: { backoff?: boolean }): void;
  succeeded(activity: string): void;
  /** How long to wait before the next attempt while failing; undefined when the last attempt succeeded. */
  backoffMs(): number | undefined;
  view(): { lastFailure?: LoopFailure };
}

/** A failure that no retry can fix (the activity rejected its input): drop the work, do not retry it. */
export function isPermanent(error: unknown): boolean {
  return error instanceof ActivityFailure && error.cause instanceof ApplicationFailure && error.cause.nonRetryable === true;
}

function messageOf(error: unknown): string {
  const cause = error instanceof ActivityFailure && error.cause ? error.cause : error;
  return (cause instanceof Error ? cause.message : String(cause)).slice(0, 300);
}

/**
 * `instance`: which run of the loop this is, for the log: a carrierScheduler's account, or
 * `singleton` for pollingControl (one loop serving every account).
 */
export function loopFailures(loop: string, instance: string, baseMs: number): LoopFailures {
  // The metric's labels say what they hold: the account, for the loop that has one.
  const account: Record<string, string> = loop === 'carrierScheduler' ? { carrier: instance } : {};
  const counter = metricMeter.createCounter('cardpoller_loop_activity_failures', 'failures', 'Failed activities of the control loops (retried with backoff)');
  let last: LoopFailure | undefined;
  let failing = false;
  // Failures of the loop's own step in a row: only they lengthen the backoff (others, such as a
  // signal's request-check, are reported in `last` but must not push the loop's next wait to 30 s).
  let backoffStreak = 0;
  return {
    record(activity, error, options = {}) {
      const consecutive = (last?.consecutive ?? 0) + 1;
      last = { activity, message: messageOf(error), at: new Date(Date.now()).toISOString(), consecutive };
      if (options.backoff ?? true) {
        failing = true;
        backoffStreak += 1;
      }
      counter.add(1, { loop, ...account, activity });
      log.warn(`${loop} ${instance}: ${activity} failed; retrying with backoff`, { consecutive, error: last.message });
    },
    succeeded() {
      if (!failing || !last) return;
      failing = false;
      backoffStreak = 0;
      last = { ...last, consecutive: 0 };
    },
    backoffMs() {
      if (!failing || !last) return undefined;
      return Math.min(MAX_BACKOFF_MS, baseMs * 2 ** Math.min(backoffStreak, 10));
    },
    view() {
      return last === undefined ? {} : { lastFailure: last };
    },
  };
}
