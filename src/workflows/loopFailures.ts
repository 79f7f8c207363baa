/**
 * Failure bookkeeping of a long-running loop (pollingControl, carrierScheduler): the loop catches
 * a failed activity instead of failing the workflow, and asks this how long to back off. Workflow
 * code: time comes from the workflow sandbox; the failure counter goes to the SDK's metrics. The
 * state and the backoff rule are the loop's {@link FailureStreak}; this adds the log and the metric.
 */
import { ActivityFailure, ApplicationFailure, log, metricMeter } from '@temporalio/workflow';
import { LOOP_FAILURES_HELP, LOOP_FAILURES_METRIC, type LoopFailure } from '../workflow-safe/loopStatus.js';
import type { FailureStreak } from './failureStreak.js';

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
 * `singleton` for pollingControl (one loop serving every account). `streak`: the loop's state's.
 */
export function loopFailures(loop: string, instance: string, streak: FailureStreak): LoopFailures {
  // The metric's labels say what they hold: the account, for the loop that has one.
  const account: Record<string, string> = loop === 'carrierScheduler' ? { carrier: instance } : {};
  const counter = metricMeter.createCounter(LOOP_FAILURES_METRIC, 'failures', LOOP_FAILURES_HELP);
  return {
    record(activity, error, options = {}) {
      const message = messageOf(error);
      const consecutive = streak.record(activity, message, Date.now(), options);
      counter.add(1, { loop, ...account, activity });
      log.warn(`${loop} ${instance}: ${activity} failed; retrying with backoff`, { consecutive, error: message });
    },
    succeeded() {
      streak.succeeded();
    },
    backoffMs: () => streak.backoffMs(),
    view: () => streak.view(),
  };
}
