/**
 * How a card's finish is retried (workflow code). A finish meets Redis: first the bookkeeping's
 * short policy (20 attempts, about 80 s); when Redis stays away longer, the same again after
 * growing waits, without an attempt limit, for CARD_FINISH_RETRY_TIMEOUT_MS (a day by default)
 * — the gateway results of the runs in flight are not lost to an outage of a few
 * minutes. Past that bound the run's records are written all the same (outcome `lease_lost`: the
 * lease ran out long before, and whoever owns the card then claims it again). The records wait for
 * PostgreSQL without limit either way (src/workflows/cardExecution.ts).
 */
import type { RetryPolicy } from '@temporalio/common';
import { ApplicationFailure, sleep } from '@temporalio/workflow';
import type { FinishRetrySettings } from '../workflow-safe/cardRun.js';

/**
 * Marks the runs that go on trying a finish after the short policy failed: in a history recorded
 * before, the run (or the batch's card) failed at that point instead.
 */
export const FINISH_LASTING_PATCH = 'card-finish-retry-lasting';

/** The short policy as it always was (the commands of a run that meets no outage are unchanged). */
const FIRST_ATTEMPTS = 20;
const FIRST_INITIAL_MS = 200;
const FIRST_MAXIMUM_MS = 5000;
/** Defaults of the lasting policy, for plans made by a worker that did not send settings. */
export const DEFAULT_FINISH_RETRY: FinishRetrySettings = { initialIntervalMs: FIRST_INITIAL_MS, maximumIntervalMs: 60_000, timeoutMs: 86_400_000 };

/** The short policy; `settings` only make it faster (tests), never longer than it was. */
export function firstFinishRetry(settings: FinishRetrySettings | undefined): RetryPolicy {
  const initial = Math.min(settings?.initialIntervalMs ?? FIRST_INITIAL_MS, FIRST_INITIAL_MS);
  const maximum = Math.min(settings?.maximumIntervalMs ?? FIRST_MAXIMUM_MS, FIRST_MAXIMUM_MS);
  return { initialInterval: initial, backoffCoefficient: 2, maximumInterval: Math.max(initial, maximum), maximumAttempts: FIRST_ATTEMPTS };
}

/**
 * The lasting retry: `attempt` (a local activity under the short policy) again after a workflow
 * timer that doubles up to the maximum interval, until it succeeds (its value) or the bound has
 * passed (undefined). Timers in the workflow, not a local activity's own schedule-to-close: each
 * attempt is one marker, each wait one timer, and the bound is kept on the workflow's clock.
 */
export async function retryLasting<T>(attempt: () => Promise<T>, settings: FinishRetrySettings | undefined): Promise<T | undefined> {
  const { initialIntervalMs, maximumIntervalMs, timeoutMs } = settings ?? DEFAULT_FINISH_RETRY;
  const deadline = Date.now() + timeoutMs;
  let delay = initialIntervalMs;
  for (;;) {
    if (Date.now() + delay > deadline) return undefined;
    await sleep(delay);
    delay = Math.min(delay * 2, Math.max(initialIntervalMs, maximumIntervalMs));
    try {
      return await attempt();
    } catch (error) {
      // A refusal is not an outage: waiting longer cannot help.
      if (isNonRetryable(error)) return undefined;
    }
  }
}

/** The activity failed with an error marked non-retryable (not Redis being away). */
export function isNonRetryable(error: unknown): boolean {
  for (let cause: unknown = error, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth += 1) {
    if (cause instanceof ApplicationFailure && cause.nonRetryable) return true;
  }
  return false;
}
