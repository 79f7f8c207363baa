/**
 * carrierScheduler(carrierId): the dispatch loop of one carrier account.
 *
 * Every second: one claim activity (Redis decides which cards are due and owned), then one
 * `cardCheck` child per claimed card on the card task queue, abandoned so it outlives this run.
 * A child that cannot start has its claim released at once. The loop continues-as-new before its
 * history grows large (a few thousand events), once its children have completed and every
 * in-flight update handler has finished; rounds go on meanwhile, their runs started by the claim.
 */
import {
  ApplicationFailure,
  type ChildWorkflowHandle,
  type Workflow,
  ParentClosePolicy,
  WorkflowIdReusePolicy,
  allHandlersFinished,
  condition,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  startChild,
  workflowInfo,
  log,
  patched,
} from '@temporalio/workflow';
import { isPermanent, loopFailures } from './loopFailures.js';
import { continueAsNewToCurrentVersion, targetVersionChanged } from './versionUpgrade.js';
import type { ControlActivities } from '../activities/control.js';
import { CARD_ID_ATTRIBUTE, CARRIER_ID_ATTRIBUTE, CLAIMED_BY_ATTRIBUTE, cardIdsSearchAttribute } from '../workflow-safe/searchAttributes.js';
import { SCHEDULER_CONTINUING_AS_NEW, type RequestCheckInput } from '../workflow-safe/requestCheck.js';
import { cardTaskQueue, type TaskQueueNames } from '../workflow-safe/taskQueues.js';
import { cardBatchWorkflowId, cardWorkflowId } from '../workflow-safe/workflowIds.js';
import type { ClaimRoundResult, ClaimedCard, GroupBudgetView } from '../workflow-safe/claimRound.js';
import type { SchedulerStatus } from '../workflow-safe/loopStatus.js';
import { validateRequestCheck } from '../workflow-safe/requestCheckValidation.js';
import { initialInflightControl, nextInflightControl, type InflightControlState } from '../workflow-safe/inflightControl.js';
import { cardCheck } from './cardCheck.js';
import { cardBatch } from './cardBatch.js';
import { DEFAULT_CARD_BATCH_SIZE, cardBatches, type CardBatch } from '../workflow-safe/cardBatches.js';
import { configChangedSignal, pauseSignal, requestCheckSignal, requestCheckUpdate, resumeSignal, schedulerStatusQuery } from './messages.js';

export interface CarrierSchedulerArgs {
  readonly carrierId: string;
  readonly taskQueues: TaskQueueNames;
  readonly workflowIdPrefix?: string;
  /** Continue-as-new once the history has this many events (Temporal's hard limit is 51 200). */
  readonly maxHistoryEvents?: number;
  /** …or this many bytes, whichever comes first. */
  readonly maxHistoryBytes?: number;
  readonly tickMs?: number;
  /** Request-check signals handled at once, at most (the rest stay queued for the next ticks). */
  readonly maxSignalsPerTick?: number;
  /** State carried over continue-as-new. */
  readonly paused?: boolean;
  readonly rounds?: number;
  readonly pendingRequests?: readonly RequestCheckInput[];
  readonly inflightControl?: InflightControlState;
  readonly counters?: { readonly expiredLeases: number; readonly startFailures: number };
}

/**
 * A few thousand events at most: a run that must be replayed (its worker restarted, its cache entry
 * evicted) replays its whole history inside one workflow task, and on a starved CPU a 4 k-event
 * history took longer than the 10 s task timeout. The dev server suggests continue-as-new at ~4 k.
 */
export const DEFAULT_MAX_HISTORY_EVENTS = 2000;
export const DEFAULT_MAX_HISTORY_BYTES = 2 * 1024 * 1024;
/** The rollover of runs started before DRAIN_CHILDREN_PATCH: at 8 000 events, without waiting for children. */
const PREVIOUS_MAX_HISTORY_EVENTS = 8000;
const DRAIN_CHILDREN_PATCH = 'scheduler-drain-children';
/**
 * Longest a run waits for the completions of the children it started before it continues as new
 * anyway. Rounds go on meanwhile (their runs started by the claim activity), so the wait costs no
 * claiming; the bound only matters for a child that runs long (its records waiting for PostgreSQL).
 */
const CHILD_DRAIN_MAX_MS = 30_000;
const DEFAULT_TICK_MS = 1000;
/**
 * Runs from this patch on claim first and handle their request-check signals beside the loop, at
 * most `maxSignalsPerTick` at once: a signal whose activity is slow or failing (PostgreSQL away in
 * async-ingest mode, where polling is meant to go on) no longer holds the claim round back.
 */
const CLAIM_BEFORE_SIGNALS_PATCH = 'scheduler-claim-before-signals';
/** Enough for a burst of request-checks to clear in a few ticks, small enough to bound one batch's work. */
const DEFAULT_MAX_SIGNALS_PER_TICK = 100;
/** Rounds between sweeps for priority items whose retry is due (their retry delay is seconds). */
const PRIORITY_RETRY_EVERY_ROUNDS = 5;

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
  const tickMs = args.tickMs ?? DEFAULT_TICK_MS;
  let lastRoundAt: number | undefined;
  // Decided once, at the start of the run: a run started by the previous release keeps its
  // rollover rules (8 000 events, at once) to the end, or its replay would not match its history.
  const drainsChildren = patched(DRAIN_CHILDREN_PATCH);
  const maxHistory = args.maxHistoryEvents ?? (drainsChildren ? DEFAULT_MAX_HISTORY_EVENTS : PREVIOUS_MAX_HISTORY_EVENTS);
  const maxHistoryBytes = args.maxHistoryBytes ?? (drainsChildren ? DEFAULT_MAX_HISTORY_BYTES : Number.POSITIVE_INFINITY);
  // Decided once too: a run started before the patch handles its signals before the claim to its end.
  const claimsFirst = patched(CLAIM_BEFORE_SIGNALS_PATCH);
  const maxSignalsPerTick = Math.max(1, args.maxSignalsPerTick ?? DEFAULT_MAX_SIGNALS_PER_TICK);
  let paused = args.paused ?? false;
  let refreshConfig = true;
  let rounds = args.rounds ?? 0;
  let status: SchedulerStatus = {
    carrierId: args.carrierId,
    paused,
    mode: 'claiming',
    rounds,
    running: 0,
    claimedLastTick: 0,
    expiredLeases: args.counters?.expiredLeases ?? 0,
    startFailures: args.counters?.startFailures ?? 0,
    lanes: { priority: 0, normal: 0 },
    groups: [] as GroupBudgetView[],
    orchestration: { limitedBy: 'none', inflightLimit: 0, configuredInflightLimit: 0, startsPerSec: 0, startLagMs: 0, baseLagMs: null, capacityPerSec: null },
  };
  // Claiming bounded by what the engine runs (see common/inflightControl): state kept across rounds and runs.
  let inflight: InflightControlState | undefined = args.inflightControl;
  const claimedBy = `${workflowInfo().workflowId}/${workflowInfo().runId}`;
  const cardRuns = { taskQueues: args.taskQueues, workflowIdPrefix: args.workflowIdPrefix ?? '', claimedBy };
  const pendingSignals: RequestCheckInput[] = [...(args.pendingRequests ?? [])];
  // Signal request-checks whose activity failed: kept (in arrival order) and tried again next tick.
  const retrySignals: RequestCheckInput[] = [];
  // Signals being handled beside the loop (runs with the patch): one batch at a time. A run about
  // to continue as new starts no batch and waits for the one under way (its rounds go on), so no
  // request is cut off mid-way and sent again by the next run.
  let signalWork: Promise<void> | undefined;
  // Children start without blocking the loop: each start costs a server round trip, and a loop
  // that waited for them would stretch its one-second tick (and with it the budget per round).
  const toRelease: ClaimedCard[] = [];
  let startsInFlight = 0;
  // Children of this run that have not completed: an abandoned child still reports its completion
  // to this run, and a completion that arrives while the run's task continues as new makes the
  // server refuse that task (UNHANDLED_COMMAND), which evicts the run and replays its history.
  let childrenOpen = 0;
  const childClosed = (): void => {
    childrenOpen -= 1;
  };
  let startFailures = status.startFailures;
  // A started child is counted open until it reports its completion; one that cannot start has
  // its cards' claims released.
  const track = (start: Promise<ChildWorkflowHandle<Workflow>>, cards: readonly ClaimedCard[], what: string): void => {
    startsInFlight += 1;
    start.then(
      (child) => {
        startsInFlight -= 1;
        childrenOpen += 1;
        void child.result().then(childClosed, childClosed);
      },
      (error: unknown) => {
        startsInFlight -= 1;
        startFailures += cards.length;
        log.warn(`${what} could not start; releasing its claims`, { cardIds: cards.map((card) => card.cardId), error: String(error) });
        toRelease.push(...cards);
      },
    );
  };
  const launch = (card: ClaimedCard, claimedAt: number, dueHorizonMs: number): void => {
    const start = startChild(cardCheck, {
      workflowId: cardWorkflowId(card.cardId, args.workflowIdPrefix),
      taskQueue: cardTaskQueue(args.taskQueues, card.fromPriority),
      args: [
        {
          carrierId: args.carrierId,
          cardId: card.cardId,
          token: card.token,
          fromPriority: card.fromPriority,
          claimedAt,
          taskQueues: args.taskQueues,
          ...(dueHorizonMs > 0 ? { dueHorizonMs } : {}),
        },
      ],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      // A new run under the same id for every execution; Temporal rejects one while another runs.
      // No run timeout: every phase of the run bounds itself (step and total timeouts), except the
      // records, which wait for PostgreSQL as long as it takes after the claim is finished.
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      typedSearchAttributes: [
        { key: CARD_ID_ATTRIBUTE, value: card.cardId },
        { key: CARRIER_ID_ATTRIBUTE, value: args.carrierId },
        { key: CLAIMED_BY_ATTRIBUTE, value: claimedBy },
      ],
    });
    track(start, [card], 'cardCheck');
  };
  // CARD_RUN_SHAPE=batch: one cardBatch run per batch of the round (priority batches first, on the
  // priority queue); its id names the round, so ids never repeat and no two batches share one.
  const launchBatch = (batch: CardBatch, tokenPrefix: string, claimedAt: number, dueHorizonMs: number): void => {
    const start = startChild(cardBatch, {
      workflowId: cardBatchWorkflowId(args.carrierId, tokenPrefix, batch.index, args.workflowIdPrefix),
      taskQueue: cardTaskQueue(args.taskQueues, batch.fromPriority),
      args: [
        {
          carrierId: args.carrierId,
          cards: batch.cards,
          fromPriority: batch.fromPriority,
          claimedAt,
          taskQueues: args.taskQueues,
          ...(dueHorizonMs > 0 ? { dueHorizonMs } : {}),
        },
      ],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      typedSearchAttributes: [
        cardIdsSearchAttribute(batch.cards),
        { key: CARRIER_ID_ATTRIBUTE, value: args.carrierId },
        { key: CLAIMED_BY_ATTRIBUTE, value: claimedBy },
      ],
    });
    track(start, batch.cards, 'cardBatch');
  };
  // Every activity of the loop can fail for as long as Redis or PostgreSQL is away: the loop
  // catches, backs off, reports it in status, and keeps going (nothing else would restart it).
  const failures = loopFailures('carrierScheduler', args.carrierId, tickMs);
  const releaseFailedStarts = async (): Promise<void> => {
    if (toRelease.length === 0) return;
    const cards = toRelease.splice(0, toRelease.length);
    try {
      await control.releaseClaims({ carrierId: args.carrierId, cards });
    } catch (error) {
      toRelease.push(...cards);
      failures.record('releaseClaims', error, { backoff: false });
    }
  };

  /**
   * Handles request-check signals: different cards in parallel, one card's requests in arrival
   * order (they merge into one priority item). A request rejected for good (bad data, unknown
   * input: the activity says non-retryable and has audited it) is dropped with a log line and is
   * no failure of the loop; any other failure keeps it and the card's later ones, in order, for
   * the next tick.
   */
  const handleSignals = async (signals: readonly RequestCheckInput[]): Promise<void> => {
    const byCard = new Map<string, RequestCheckInput[]>();
    for (const request of signals) byCard.set(request.cardId, [...(byCard.get(request.cardId) ?? []), request]);
    const requeued: RequestCheckInput[] = [];
    await Promise.all(
      [...byCard.values()].map(async (requests) => {
        for (const [index, request] of requests.entries()) {
          try {
            const result = await control.requestCheck({ carrierId: args.carrierId, request, fromSignal: true });
            // With the patch the claim already ran: the next one takes the card without waiting out the tick.
            if (claimsFirst && result.requested > 0) wakeEarly = true;
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
    // Ahead of the signals still queued: they are older, and a card's later requests may be among those.
    retrySignals.unshift(...requeued);
  };
  /** Starts the next batch of signals (the oldest first, at most maxSignalsPerTick) unless one is under way. */
  const startSignalWork = (): void => {
    if (signalWork !== undefined || drainingSince !== undefined) return;
    const batch = retrySignals.splice(0, maxSignalsPerTick);
    batch.push(...pendingSignals.splice(0, maxSignalsPerTick - batch.length));
    if (batch.length === 0) return;
    signalWork = handleSignals(batch).finally(() => {
      signalWork = undefined;
    });
  };

  // Continue-as-new in two phases. `drainingSince`: the history is large enough; rounds go on, but
  // their runs are started by the claim activity (no new children), until the children already
  // started have completed (bounded by CHILD_DRAIN_MAX_MS). `closing`: the last step. Accepted
  // updates must finish in the run that accepted them, so a steady stream of them would keep the
  // run from ever rolling over: from here new ones are rejected as `scheduler_continuing_as_new`
  // and the client (temporalControl.requestCheck) retries them against the next run.
  let drainingSince: number | undefined;
  let closing = false;
  let wakeEarly = false;
  setHandler(
    requestCheckUpdate,
    async (input) => {
      const result = await control.requestCheck({ carrierId: args.carrierId, request: input });
      // The card is due in the priority lane now: claim it at once instead of at the next tick.
      if (result.requested > 0) wakeEarly = true;
      return result;
    },
    {
      validator: (input: RequestCheckInput) => {
        validateRequestCheck(input);
        if (closing) throw ApplicationFailure.nonRetryable('carrierScheduler is continuing as new; retry', SCHEDULER_CONTINUING_AS_NEW);
      },
    },
  );
  setHandler(requestCheckSignal, (input) => {
    // Signals cannot be rejected; invalid ones are dropped with a log line rather than failing the loop.
    try {
      validateRequestCheck(input);
      pendingSignals.push(input);
    } catch (error) {
      log.warn('dropping invalid requestCheck signal', { error: String(error) });
    }
  });
  setHandler(pauseSignal, () => void (paused = true));
  setHandler(resumeSignal, () => void (paused = false));
  setHandler(configChangedSignal, () => void (refreshConfig = true));
  setHandler(schedulerStatusQuery, () => ({ ...status, paused, ...failures.view() }));

  for (;;) {
    const tickStart = Date.now();
    // Before the patch: the signals queued when the tick starts, all of them, before the claim.
    if (!claimsFirst) await handleSignals([...retrySignals.splice(0, retrySignals.length), ...pendingSignals.splice(0, pendingSignals.length)]);
    if (!paused) {
      rounds += 1;
      const now = Date.now();
      const sinceLastRoundMs = lastRoundAt === undefined ? tickMs : now - lastRoundAt;
      lastRoundAt = now;
      let result: ClaimRoundResult | undefined;
      const tokenPrefix = `${workflowInfo().runId}.${rounds}`;
      try {
        result = await claimer.claimRound({
          carrierId: args.carrierId,
          tokenPrefix,
          refreshConfig,
          sinceLastRoundMs,
          roundAt: now,
          ...(inflight === undefined ? {} : { adaptiveLimit: inflight.limit, lookaheadMs: lookahead(inflight, tickMs) }),
          ...(drainingSince === undefined ? {} : { startRuns: true }),
          cardRuns,
        });
        refreshConfig = false;
        failures.succeeded('claimRound');
      } catch (error) {
        failures.record('claimRound', error);
      }
      if (result === undefined) {
        status = { ...status, mode: 'degraded', rounds, claimedLastTick: 0 };
      } else if (result.kind === 'stop') {
        return { stopped: result.reason };
      } else if (result.kind === 'idle') {
        status = { ...status, mode: 'idle', rounds, claimedLastTick: 0 };
      } else {
        if (!result.startedByClaim) {
          if (result.runShape === 'batch') {
            for (const batch of cardBatches(result.claimed, result.batchSize ?? DEFAULT_CARD_BATCH_SIZE))
              launchBatch(batch, tokenPrefix, now, result.dueHorizonMs ?? 0);
          } else for (const card of result.claimed) launch(card, now, result.dueHorizonMs ?? 0);
        }
        startFailures += result.startFailures;
        inflight = nextInflightControl(inflight ?? initialInflightControl(result.maxInflightLimit, result.budgetQps), {
          ...result.engine,
          elapsedMs: sinceLastRoundMs,
          limitedBy: result.limitedBy,
          maxLimit: result.maxInflightLimit,
          budgetQps: result.budgetQps,
          leaseMs: result.leaseMs,
        });
        status = {
          ...status,
          mode: 'claiming',
          rounds,
          running: result.running,
          claimedLastTick: result.claimed.length,
          expiredLeases: status.expiredLeases + result.expired,
          startFailures,
          lanes: result.lanes,
          groups: result.groups,
          orchestration: {
            limitedBy: result.limitedBy,
            inflightLimit: inflight.limit,
            configuredInflightLimit: result.maxInflightLimit,
            startsPerSec: round1(inflight.startsPerSec),
            startLagMs: Math.round(inflight.startLagMs),
            baseLagMs: inflight.baseLagMs == null ? null : Math.round(inflight.baseLagMs),
            capacityPerSec: inflight.capacityPerSec === null ? null : round1(inflight.capacityPerSec),
          },
        };
      }
    }
    // With the patch: after the claim, beside the loop (the next round does not wait for it).
    if (claimsFirst) startSignalWork();
    await releaseFailedStarts();
    if (!paused && rounds % PRIORITY_RETRY_EVERY_ROUNDS === 0) {
      try {
        await claimer.requeueDuePriorityItems({ carrierId: args.carrierId });
      } catch (error) {
        failures.record('requeueDuePriorityItems', error, { backoff: false });
      }
    }
    const info = workflowInfo();
    if (
      drainingSince === undefined &&
      (info.historyLength >= maxHistory || info.historySize >= maxHistoryBytes || info.continueAsNewSuggested || targetVersionChanged())
    ) {
      drainingSince = Date.now();
    }
    const childrenDone = childrenOpen === 0 && startsInFlight === 0;
    // (Always true in a run without the claim-first patch: it handles its signals inside the tick.)
    const signalsSettled = signalWork === undefined;
    // A run of the previous release continues as new at once, as it did then.
    if (signalsSettled && drainingSince !== undefined && (!drainsChildren || childrenDone || Date.now() - drainingSince >= CHILD_DRAIN_MAX_MS)) {
      if (drainsChildren && !childrenDone) log.warn('continuing as new with children still running', { childrenOpen, startsInFlight });
      // Let child starts and running update handlers (request-checks) complete first, accepting no
      // new update meanwhile (see `closing`); queued signals travel along as input.
      closing = true;
      await condition(() => startsInFlight === 0 && allHandlersFinished());
      await releaseFailedStarts();
      // The next run starts on the current worker-deployment version (src/workflows/versionUpgrade.ts).
      await continueAsNewToCurrentVersion<typeof carrierScheduler>({
        ...args,
        paused,
        rounds,
        pendingRequests: [...retrySignals, ...pendingSignals],
        ...(inflight === undefined ? {} : { inflightControl: inflight }),
        counters: { expiredLeases: status.expiredLeases, startFailures },
      });
    }
    // Wake early when a request-check signal arrives, so the priority lane is served within the tick.
    // After a failure the next tick waits longer (backoff up to 30 s), and a new signal does not cut it short.
    const waitMs = failures.backoffMs() ?? Math.max(1, tickMs - (Date.now() - tickStart));
    if (claimsFirst) {
      // A new signal is taken up at once, beside the loop, when no batch is under way; the loop
      // itself wakes early only when a request put a card in the priority lane (the next claim takes it).
      const waitUntil = Date.now() + waitMs;
      for (;;) {
        const left = waitUntil - Date.now();
        if (left <= 0) break;
        const signalled = () => signalWork === undefined && drainingSince === undefined && pendingSignals.length > 0 && failures.backoffMs() === undefined;
        if (!(await condition(() => wakeEarly || signalled(), left)) || wakeEarly) break;
        startSignalWork();
      }
    } else {
      await condition(() => (pendingSignals.length > 0 && failures.backoffMs() === undefined) || wakeEarly, waitMs);
    }
    wakeEarly = false;
  }
}

const round1 = (value: number): number => Math.round(value * 10) / 10;

/**
 * How far ahead of due to claim: the mean start lag the engine shows now, plus half a tick (a card
 * that falls due between two rounds waits for the next one). The claim activity bounds it.
 */
const lookahead = (state: InflightControlState, tickMs: number): number => Math.round(state.startLagMs + tickMs / 2);
