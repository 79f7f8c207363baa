/**
 * The claim loop of one account as one long activity per lap (SCHEDULER_LOOP=activity; docs/design.md,
 * 'The claim loop as an activity'). Every tick it runs the same claim round as the scheduler's
 * local activity, with the same decisions (SchedulerState: adaptive limit, lookahead, engine share,
 * backoff), and starts the claimed cards' runs with the client; the workflow is not woken for it.
 *
 * An account that sleeps (lua/markIdle.lua marked it, nothing due in its priority lane) costs one
 * Redis round trip a tick and no round. A loop claims only while it owns the account (the `loop`
 * key holds its generation): a newer lap, or a stop, supersedes it at its next tick, so a loop left
 * on a frozen worker ends by itself when it wakes.
 */
import { Context } from '@temporalio/activity';
import type { CarrierQueueStore } from '../redis/carrierQueueStore.js';
import type { ClaimRoundInput, ClaimRoundResult } from '../workflow-safe/claimRound.js';
import type { ClaimLoopInput, ClaimLoopLap } from '../workflow-safe/claimLoop.js';
import { SchedulerState } from '../workflows/scheduler/schedulerState.js';
import { isDatabaseUnreachable } from '../runtime/databaseErrors.js';
import { LOOP_FAILURES_HELP, LOOP_FAILURES_METRIC } from '../workflow-safe/loopStatus.js';

export interface ClaimLoopDeps {
  readonly store: CarrierQueueStore;
  /** One claim round (src/activities/control.ts), as a first attempt: each round has a token prefix of its own. */
  readonly claimRound: (input: ClaimRoundInput) => Promise<ClaimRoundResult>;
  /** Requests again the account's priority items whose retry is due. */
  readonly requeueDuePriorityItems: (carrierId: string) => Promise<number>;
  readonly log: (message: string, fields: Record<string, unknown>) => void;
  /**
   * True once another worker-deployment version became current (src/workers/currentVersionWatch.ts);
   * absent without worker versioning. The scheduler has no workflow task while a lap runs, so only
   * the lap can notice: it ends, and the scheduler continues as new onto that version.
   */
  readonly currentVersionLeft?: () => Promise<boolean>;
}

/** The patches every loop takes: it runs today's rules (a lap records no history to replay). */
const CURRENT_RULES = { drainsChildren: true, claimsFirst: true, drainsUntilQuiet: true } as const;
/**
 * A sleeping account's loop publishes its status view every few ticks, not every tick (nothing in
 * it changes while it sleeps): with a thousand accounts in one process, a write a tick each was a
 * thousand Redis round trips a second on the event loop that also starts their runs. The view
 * outlives a few refreshes, so a reader never finds a running loop without one, even on a busy
 * machine whose ticks run late.
 */
const VIEW_REFRESH_TICKS = 5;
const VIEW_TTL_TICKS = 3 * VIEW_REFRESH_TICKS;
/**
 * Heartbeats are sent to the server at most every 0.8 × the heartbeat timeout whatever the calls
 * (the SDK throttles); each call still encodes its details on the event loop, so the loop calls it
 * every so often rather than every tick.
 */
const HEARTBEAT_EVERY_MS = 10_000;
/**
 * A lap ends for a version switch only after this long: should the scheduler's workflow task not
 * agree that its target version changed, it starts a new lap, and laps would otherwise follow each
 * other without a claim.
 */
const VERSION_SWITCH_MIN_LAP_MS = 5_000;

/** The activity's context, or undefined in a direct call (tests). */
function currentContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleepUnlessAborted(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted === true) {
      resolve();
      return;
    }
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

export async function runClaimLoop(deps: ClaimLoopDeps, input: ClaimLoopInput): Promise<ClaimLoopLap> {
  const { carrierId } = input.scheduler;
  const context = currentContext();
  const signal = context?.cancellationSignal;
  const state = new SchedulerState(input.scheduler, { workflowId: input.workflowId, runId: input.runId, tokenRunId: input.generation }, CURRENT_RULES);
  const { tickMs } = state.settings;
  const lapStarted = Date.now();
  const lapEnds = lapStarted + input.lapMs;
  const lap = (ended: 'lap' | 'superseded' | 'cancelled' | 'versionChanged'): ClaimLoopLap => {
    const next = state.nextRunArgs(input.scheduler);
    return {
      kind: 'lap',
      ended,
      rounds: next.rounds ?? 0,
      ...(next.inflightControl === undefined ? {} : { inflightControl: next.inflightControl }),
      counters: next.counters ?? { expiredLeases: 0, startFailures: 0 },
    };
  };
  // The workflow loop's failure counter (src/workflows/loopFailures.ts), under the same name and labels.
  const failures = context?.metricMeter.createCounter(LOOP_FAILURES_METRIC, 'failures', LOOP_FAILURES_HELP);
  const failed = (activity: string, error: unknown): void => {
    state.failures.record(activity, String(error), Date.now());
    failures?.add(1, { loop: 'carrierScheduler', carrier: carrierId, activity });
    deps.log(`${activity} failed; backing off`, { carrierId, error: String(error) });
  };
  await deps.store.ownClaimLoop(carrierId, input.generation);
  let horizonMs = 0;
  let viewPublishedAt = Number.NEGATIVE_INFINITY;
  let heartbeatAt = Number.NEGATIVE_INFINITY;
  for (;;) {
    if (signal?.aborted === true) return lap('cancelled');
    const tickStart = Date.now();
    if (tickStart >= lapEnds) return lap('lap');
    if (tickStart - lapStarted >= VERSION_SWITCH_MIN_LAP_MS && (await deps.currentVersionLeft?.()) === true) return lap('versionChanged');
    try {
      const look = await deps.store.claimLoopState(carrierId, input.generation, horizonMs, tickStart);
      if (!look.owned) return lap('superseded');
      // Woken by the priority lane before the mark's end: the mark goes, or the cards this round
      // claims would have their next dues (a confirmation a second later, say) slept past, since
      // only a round that claims nothing marks the account again (lua/markIdle.lua).
      if (look.marked && !look.sleeping) await deps.store.clearIdle(carrierId);
      if (!look.sleeping) {
        const round = state.beginRound(tickStart);
        let result: ClaimRoundResult | undefined;
        try {
          // The loop starts its runs itself, whatever CARD_START_MODE says: there is no workflow task to start children from.
          result = await deps.claimRound({ ...round, startRuns: true });
          state.claimSucceeded();
          state.failures.succeeded();
        } catch (error) {
          failed('claimRound', error);
        }
        const outcome = state.endRound(result);
        if (outcome.kind === 'stop') return { kind: 'stop', reason: outcome.reason };
        if (result?.kind === 'claimed') horizonMs = result.dueHorizonMs ?? 0;
        if (state.priorityRetryDue()) await requeue(deps, carrierId);
      }
      // A round changes the view; a sleeping tick changes nothing in it.
      if (!look.sleeping || tickStart - viewPublishedAt >= VIEW_REFRESH_TICKS * tickMs) {
        await deps.store.publishLoopView(carrierId, state.view(), tickMs * VIEW_TTL_TICKS);
        viewPublishedAt = tickStart;
      }
    } catch (error) {
      // Redis away: the loop backs off and tries again, as the workflow's loop does.
      failed('claimRound', error);
    }
    if (tickStart - heartbeatAt >= HEARTBEAT_EVERY_MS) {
      context?.heartbeat();
      heartbeatAt = tickStart;
    }
    // A sleeping account is looked at every tick (a wake-up is a deleted mark, not a signal here).
    const waitMs = state.failures.backoffMs() ?? Math.max(1, tickMs - (Date.now() - tickStart));
    await sleepUnlessAborted(waitMs, signal);
  }
}

async function requeue(deps: ClaimLoopDeps, carrierId: string): Promise<void> {
  try {
    await deps.requeueDuePriorityItems(carrierId);
  } catch (error) {
    if (!isDatabaseUnreachable(error)) deps.log('priority retry sweep failed', { carrierId, error: String(error) });
  }
}
