/**
 * A request-check served by its caller (the API): the priority item and `requestCheck.lua` through
 * the same service the scheduler's `requestCheck` activity runs (src/app/pollingServices.ts), then
 * the account's scheduler is woken by a `priorityRequested` update to claim the card at once.
 * Through the scheduler's update the answer waited for two of the scheduler's workflow tasks and an
 * activity task, each queued behind its claim rounds under load (overload bench, 2026-12-06:
 * request → answer p99 2.2–2.5 s); see docs/design.md §11.
 */
import type { RequestChecker } from './ports.js';
import { schedulerRunning, wakeScheduler, type OrchestrationRef } from './temporalControl.js';
import type { RequestCheckInput, RequestCheckResult } from '../workflow-safe/requestCheck.js';

/** The account's scheduler has no open run: nothing was written (try again once it runs). */
export class SchedulerNotRunning extends Error {
  constructor(readonly carrierId: string) {
    super(`the scheduler of carrier account ${carrierId} is not running`);
    this.name = 'SchedulerNotRunning';
  }
}

export async function serveRequestCheck(
  ref: OrchestrationRef,
  requests: RequestChecker,
  carrierId: string,
  input: RequestCheckInput,
  /** `wake: false` when claim loops look at their priority lane every tick (SCHEDULER_LOOP=activity): the update would cost an action for nothing. */
  options: { readonly wake: boolean } = { wake: true },
): Promise<RequestCheckResult> {
  // Nothing is written while no scheduler would claim the card (a missing one throws WorkflowNotFoundError).
  if (!(await schedulerRunning(ref, carrierId))) throw new SchedulerNotRunning(carrierId);
  const result = await requests.requestCheck(carrierId, input);
  // Only a request that put something in a lane needs the scheduler now. Not waited for: the
  // wake-up waits for one of the scheduler's workflow tasks, and the request is durable already —
  // refused by a closing run, or lost with the scheduler, the card is claimed at the next round.
  if (result.requested > 0 && options.wake) void wakeScheduler(ref, carrierId, input.cardId).catch(() => undefined);
  return result;
}
