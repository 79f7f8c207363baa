/**
 * carrierScheduler(carrierId): the dispatch loop of one carrier account.
 *
 * Every second: one claim activity (Redis decides which cards are due and owned), then one
 * `cardCheck` child per claimed card on the card task queue, abandoned so it outlives this run.
 * A round that finds nothing due nor in flight lets the loop sleep until the next due time (at
 * most SCHEDULER_IDLE_MAX_MS), unless a wake, a request-check or a configuration change comes first.
 * A child that cannot start has its claim released at once. The loop continues-as-new before its
 * history grows large (a few thousand events), once its children have completed and every
 * in-flight update handler has finished; rounds go on meanwhile, their runs started by the claim.
 *
 * The loop's state and decisions are SchedulerState's (scheduler/schedulerState.ts, unit-tested);
 * this file wires them to the activities, child starts, timers, signals and updates, in an order
 * the recorded histories (test/replay) pin down: the commands it emits must not change.
 */
import {
  type ChildWorkflowHandle,
  type Workflow,
  allHandlersFinished,
  condition,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  startChild,
  workflowInfo,
  log,
  patched,
  sleep,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { isPermanent, loopFailures } from './loopFailures.js';
import { continueAsNewToCurrentVersion, targetVersionChanged } from './versionUpgrade.js';
import type { ControlActivities } from '../activities/control.js';
import type { ClaimRoundResult, ClaimedCard } from '../workflow-safe/claimRound.js';
import type { RequestCheckInput } from '../workflow-safe/requestCheck.js';
import { cardCheck } from './cardCheck.js';
import { cardBatch } from './cardBatch.js';
import {
  configChangedSignal,
  pauseSignal,
  priorityRequestedUpdate,
  requestCheckSignal,
  requestCheckUpdate,
  resumeSignal,
  schedulerStatusQuery,
  wakeSignal,
} from './messages.js';
import { SchedulerState, type Launch } from './scheduler/schedulerState.js';
import { requestsByCard } from './scheduler/signalQueue.js';
import { cardBatchStart, cardCheckStart } from './scheduler/cardRunStarts.js';
import type { CarrierSchedulerArgs } from './scheduler/schedulerSettings.js';
import { CLAIM_LOOP_HEARTBEAT_TIMEOUT_MS, CLAIM_LOOP_LAP_MS, claimLoopTaskQueue, type ClaimLoopLap } from '../workflow-safe/claimLoop.js';

export { DEFAULT_MAX_HISTORY_EVENTS, type CarrierSchedulerArgs } from './scheduler/schedulerSettings.js';

/** Runs from this patch on continue as new at 2 000 events or 2 MiB, once their children completed. */
const DRAIN_CHILDREN_PATCH = 'scheduler-drain-children';
/**
 * Runs from this patch on claim first and handle their request-check signals beside the loop, at
 * most `maxSignalsPerTick` at once: a signal whose activity is slow or failing (PostgreSQL away in
 * async-ingest mode, where polling is meant to go on) no longer holds the claim round back.
 */
const CLAIM_BEFORE_SIGNALS_PATCH = 'scheduler-claim-before-signals';
/** Runs from this patch on leave still-running children at continue-as-new only once they have gone quiet (schedulerSettings.ts). */
const QUIET_DRAIN_PATCH = 'scheduler-quiet-drain';
/**
 * Runs from this patch on give a refused start's claims back in the workflow task that learns of
 * the refusal, not after the next claim round: a claim held meanwhile (≈ 1 s, more often since a
 * card whose previous run is still open is retried within 0.5 s) expires instead of being released
 * when the control worker dies then (the cluster test saw 4 such leases expire beyond the runs on
 * its killed card worker, CI run 59).
 */
const RELEASE_AT_ONCE_PATCH = 'scheduler-release-at-once';
/**
 * Runs from this patch on end the wait between rounds at the first workflow task past the tick's
 * end, not only when its timer fires: a saturated server fires timers late, most for the busiest
 * workflows (overload bench, child mode: the largest account's tick timers fired 161 ms late at
 * the median, up to 1.46 s, one not within 3 s), while its child completions kept waking the run
 * every 50-100 ms. The timer stays for a run that nothing else wakes.
 */
const WAKE_ON_ANY_TASK_PATCH = 'scheduler-wake-on-any-task';

export async function carrierScheduler(args: CarrierSchedulerArgs): Promise<{ stopped: string }> {
  const control = proxyActivities<ControlActivities>({
    taskQueue: args.taskQueues.control,
    startToCloseTimeout: '10 s',
    retry: { initialInterval: '200 ms', maximumInterval: '5 s', maximumAttempts: 5 },
  });
  // The claim runs every tick: as a local activity it costs one marker event and no server round
  // trip, which keeps the tick close to one second even when the server is busy.
  const claimer = proxyLocalActivities<ControlActivities>({
    startToCloseTimeout: '10 s',
    localRetryThreshold: '2 s',
    retry: { initialInterval: '200 ms', maximumInterval: '2 s', maximumAttempts: 5 },
  });
  // Each decided once, at the start of the run, in this order: a run started by an earlier release
  // keeps that release's rules to its end, or its replay would not match its history.
  const drainsChildren = patched(DRAIN_CHILDREN_PATCH);
  const claimsFirst = patched(CLAIM_BEFORE_SIGNALS_PATCH);
  const drainsUntilQuiet = patched(QUIET_DRAIN_PATCH);
  const releasesAtOnce = patched(RELEASE_AT_ONCE_PATCH);
  const wakesOnAnyTask = patched(WAKE_ON_ANY_TASK_PATCH);
  const state = new SchedulerState(args, workflowInfo(), { drainsChildren, claimsFirst, drainsUntilQuiet });
  const { claimedBy } = state;

  // Every activity of the loop can fail for as long as Redis or PostgreSQL is away: the loop
  // catches, backs off, reports it in status, and keeps going (nothing else would restart it).
  const failures = loopFailures('carrierScheduler', args.carrierId, state.failures);
  // Release activities under way; the run continues as new only once they have ended.
  let releasesInFlight = 0;
  const releaseFailedStarts = async (): Promise<void> => {
    const cards = state.starts.takeReleases();
    if (cards.length === 0) return;
    releasesInFlight += 1;
    try {
      await control.releaseClaims({ carrierId: args.carrierId, cards });
    } catch (error) {
      state.starts.releaseFailed(cards);
      failures.record('releaseClaims', error, { backoff: false });
    } finally {
      releasesInFlight -= 1;
    }
  };

  // Children start without blocking the loop: each start costs a server round trip, and a loop
  // that waited for them would stretch its one-second tick (and with it the budget per round).
  // A started child is counted open until it reports its completion; one that cannot start has
  // its cards' claims released.
  const childClosed = (): void => state.starts.closed(Date.now());
  const track = (start: Promise<ChildWorkflowHandle<Workflow>>, cards: readonly ClaimedCard[], claimedAt: number, what: string): void => {
    state.starts.starting(cards, claimedAt);
    start.then(
      (child) => {
        state.starts.started(cards);
        void child.result().then(childClosed, childClosed);
      },
      (error: unknown) => {
        // A card run's id is the card's: the server refuses it while the previous run is open.
        state.starts.startFailed(cards, error instanceof WorkflowExecutionAlreadyStartedError);
        log.warn(`${what} could not start; releasing its claims`, { cardIds: cards.map((card) => card.cardId), error: String(error) });
        if (releasesAtOnce) void releaseFailedStarts();
      },
    );
  };
  const launch = (run: Launch): void => {
    if (run.kind === 'card') track(startChild(cardCheck, cardCheckStart(args, run, claimedBy)), [run.card], run.claimedAt, 'cardCheck');
    else track(startChild(cardBatch, cardBatchStart(args, run, claimedBy)), run.batch.cards, run.claimedAt, 'cardBatch');
  };

  /**
   * Handles request-check signals: different cards in parallel, one card's requests in arrival
   * order (they merge into one priority item). A request rejected for good (bad data, unknown
   * input: the activity says non-retryable and has audited it) is dropped with a log line and is
   * no failure of the loop; any other failure keeps it and the card's later ones, in order, for
   * the next tick.
   */
  const handleSignals = async (signals: readonly RequestCheckInput[]): Promise<void> => {
    const requeued: RequestCheckInput[] = [];
    await Promise.all(
      requestsByCard(signals).map(async (requests) => {
        for (const [index, request] of requests.entries()) {
          try {
            const result = await control.requestCheck({ carrierId: args.carrierId, request, fromSignal: true });
            state.requestServed(result, 'signal');
          } catch (error) {
            if (isPermanent(error)) {
              log.warn('dropping a request-check signal rejected for good', { cardId: request.cardId, error: String(error) });
              continue;
            }
            failures.record('requestCheck', error, { backoff: false });
            requeued.push(...requests.slice(index));
            return;
          }
        }
      }),
    );
    state.signals.requeue(requeued);
  };
  /** Starts the next batch of signals beside the loop, unless one is under way (or the run is draining). */
  const startSignalWork = (): void => {
    const batch = state.nextSignalBatch();
    if (batch === undefined) return;
    void handleSignals(batch).finally(() => state.signals.batchDone());
  };

  /**
   * SCHEDULER_LOOP=activity (the claim round handed over): the run claims through laps of a claim
   * loop activity (src/activities/claimLoop.ts) and wakes only for its messages, a lap's end or
   * failure, and continue-as-new. A pause, a configuration change (the next lap re-reads the
   * account) and a rollover stop the lap under way first: nothing claims between two laps. A lap
   * that fails (its worker died, or no worker serves the loops' queue: the deployment went back to
   * SCHEDULER_LOOP=workflow) returns to the round loop, whose next claim hands over again or claims.
   */
  let laps = 0;
  const claimInLoopActivity = async (): Promise<{ stopped: string } | undefined> => {
    const loops = proxyActivities<ControlActivities>({
      taskQueue: claimLoopTaskQueue(args.taskQueues.control),
      scheduleToStartTimeout: CLAIM_LOOP_HEARTBEAT_TIMEOUT_MS,
      startToCloseTimeout: CLAIM_LOOP_LAP_MS + CLAIM_LOOP_HEARTBEAT_TIMEOUT_MS,
      heartbeatTimeout: CLAIM_LOOP_HEARTBEAT_TIMEOUT_MS,
      // A failed lap is started again (by the round loop's next hand-over), as a new generation.
      retry: { maximumAttempts: 1 },
    });
    const { workflowId, runId } = workflowInfo();
    const rollOverDue = (): boolean => {
      const { historyLength, historySize, continueAsNewSuggested } = workflowInfo();
      const { maxHistoryEvents, maxHistoryBytes } = state.settings;
      return historyLength >= maxHistoryEvents || historySize >= maxHistoryBytes || continueAsNewSuggested || targetVersionChanged();
    };
    for (;;) {
      if (state.isPaused) {
        await condition(() => !state.isPaused || state.signalToTake() || rollOverDue());
        if (state.signalToTake()) startSignalWork();
      } else {
        laps += 1;
        const generation = `${runId}~${laps}`;
        const configChanges = state.configChanges;
        let lap: ClaimLoopLap | undefined;
        let failure: unknown;
        let done = false;
        void loops
          .runClaimLoop({ scheduler: state.nextRunArgs(args), workflowId, runId, generation, lapMs: CLAIM_LOOP_LAP_MS })
          .then(
            (result) => (lap = result),
            (error: unknown) => (failure = error),
          )
          .finally(() => (done = true));
        const interrupted = (): boolean => state.isPaused || state.configChanges !== configChanges || rollOverDue();
        for (;;) {
          await condition(() => done || interrupted() || state.signalToTake());
          if (done || interrupted()) break;
          startSignalWork();
        }
        // Until the stop is written the lap would go on claiming (a pause must stop it): tried until it lands.
        while (!done) {
          try {
            await control.stopClaimLoop({ carrierId: args.carrierId });
            await condition(() => done);
          } catch (error) {
            failures.record('stopClaimLoop', error);
            await sleep(failures.backoffMs() ?? state.settings.tickMs);
          }
        }
        const ended = lap;
        if (ended?.kind === 'stop') return { stopped: ended.reason };
        if (ended === undefined) {
          failures.record('runClaimLoop', failure);
          return undefined;
        }
        failures.succeeded('runClaimLoop');
        state.lapEnded(ended);
      }
      if (rollOverDue()) {
        state.close();
        await condition(() => !state.signals.batchRunning && allHandlersFinished());
        await continueAsNewToCurrentVersion<typeof carrierScheduler>(state.nextRunArgs(args));
      }
    }
  };

  setHandler(
    requestCheckUpdate,
    async (input) => {
      const result = await control.requestCheck({ carrierId: args.carrierId, request: input });
      state.requestServed(result, 'update');
      return result;
    },
    { validator: (input: RequestCheckInput) => state.admitUpdate(input) },
  );
  setHandler(requestCheckSignal, (input) => {
    // Signals cannot be rejected; invalid ones are dropped with a log line rather than failing the loop.
    try {
      if (!state.queueSignal(input)) log.warn('dropping a requestCheck signal: the signal queue is full', { cardId: input.cardId, queued: state.signals.size });
    } catch (error) {
      log.warn('dropping invalid requestCheck signal', { error: String(error) });
    }
  });
  setHandler(priorityRequestedUpdate, (_card: { cardId: string }) => state.requestedElsewhere(), {
    validator: (_card: { cardId: string }) => state.admitWake(),
  });
  setHandler(pauseSignal, () => state.pause());
  setHandler(resumeSignal, () => state.resume());
  setHandler(configChangedSignal, () => state.configChanged());
  setHandler(wakeSignal, () => state.wakeUp());
  setHandler(schedulerStatusQuery, () => state.view());

  for (;;) {
    const tickStart = Date.now();
    // Before the patch: the signals queued when the tick starts, all of them, before the claim.
    if (!claimsFirst) await handleSignals(state.signals.takeAll());
    if (!state.isPaused) {
      const input = state.beginRound(Date.now());
      let result: ClaimRoundResult | undefined;
      try {
        result = await claimer.claimRound(input);
        if (result.kind === 'claimed' && result.claimsHeld !== undefined)
          log.info('held the claims of children not started yet', { asked: input.holdClaims?.length ?? 0, held: result.claimsHeld });
        state.claimSucceeded();
        failures.succeeded('claimRound');
      } catch (error) {
        failures.record('claimRound', error);
      }
      const outcome = state.endRound(result);
      if (outcome.kind === 'stop') return { stopped: outcome.reason };
      if (outcome.kind === 'handOver') {
        const stopped = await claimInLoopActivity();
        if (stopped !== undefined) return stopped;
      } else for (const run of outcome.launches) launch(run);
    }
    // With the patch: after the claim, beside the loop (the next round does not wait for it).
    if (claimsFirst) startSignalWork();
    await releaseFailedStarts();
    if (state.priorityRetryDue()) {
      try {
        await claimer.requeueDuePriorityItems({ carrierId: args.carrierId });
      } catch (error) {
        failures.record('requeueDuePriorityItems', error, { backoff: false });
      }
    }
    const { historyLength, historySize, continueAsNewSuggested } = workflowInfo();
    state.observeHistory({ historyLength, historySize, continueAsNewSuggested, targetVersionChanged: targetVersionChanged() }, Date.now());
    const decision = state.continueAsNewDecision(Date.now());
    if (decision !== 'notYet') {
      if (decision === 'nowLeavingChildren')
        log.warn('continuing as new with children still running', { childrenOpen: state.starts.childrenOpen, startsInFlight: state.starts.startsInFlight });
      // Let child starts and running update handlers (request-checks) complete first, accepting no
      // new update meanwhile (see SchedulerState.admitUpdate); queued signals travel along as input.
      state.close();
      await condition(() => state.starts.startsInFlight === 0 && releasesInFlight === 0 && allHandlersFinished());
      await releaseFailedStarts();
      // The next run starts on the current worker-deployment version (src/workflows/versionUpgrade.ts).
      await continueAsNewToCurrentVersion<typeof carrierScheduler>(state.nextRunArgs(args));
    }
    // Wake early when a request-check signal arrives, so the priority lane is served within the tick.
    // After a failure the next tick waits longer (backoff up to 30 s), and a new signal does not cut it short.
    const waitMs = state.waitMs(Date.now(), tickStart);
    if (claimsFirst) {
      // A new signal is taken up at once, beside the loop, when no batch is under way; the loop
      // itself wakes early only when a request put a card in the priority lane (the next claim takes it).
      const waitUntil = Date.now() + waitMs;
      for (;;) {
        const left = waitUntil - Date.now();
        if (left <= 0) break;
        // (Workflow time is the task's: the predicate is evaluated in every task, and replays alike.)
        const tickOver = (): boolean => wakesOnAnyTask && Date.now() >= waitUntil;
        if (!(await condition(() => state.wakeEarly || state.signalToTake() || tickOver(), left)) || state.wakeEarly) break;
        startSignalWork();
      }
    } else {
      await condition(() => state.legacyWake(), waitMs);
    }
    state.tickEnded();
  }
}
