/**
 * carrierScheduler's state and decisions (as samples-typescript's safe-message-handlers keep a
 * loop's in a class of its own): what a claim round asks for, what it starts afterwards, the
 * status it reports, its signal queue and child starts, its backoff, and when it drains and
 * continues as new. Pure: time is passed in and nothing here emits a command; the workflow
 * (carrierScheduler.ts) wires it to the activities, child starts, timers, signals and updates.
 */
import { ApplicationFailure } from '@temporalio/common';
import { SCHEDULER_CONTINUING_AS_NEW, type RequestCheckInput, type RequestCheckResult } from '../../workflow-safe/requestCheck.js';
import type { CardRunPlacement, ClaimRoundInput, ClaimRoundResult, ClaimedCard } from '../../workflow-safe/claimRound.js';
import type { SchedulerStatus } from '../../workflow-safe/loopStatus.js';
import { validateRequestCheck } from '../../workflow-safe/requestCheckValidation.js';
import { engineQueues, inflightLimitOf, initialInflightControl, nextInflightControl, type InflightControlState } from '../../workflow-safe/inflightControl.js';
import { DEFAULT_CARD_BATCH_SIZE, cardBatches, type CardBatch } from '../../workflow-safe/cardBatches.js';
import { FailureStreak } from '../failureStreak.js';
import { ChildStarts } from './childStarts.js';
import { SignalQueue } from './signalQueue.js';
import {
  CHILD_DRAIN_HARD_MAX_MS,
  CHILD_DRAIN_MAX_MS,
  CHILD_DRAIN_QUIET_MS,
  PRIORITY_RETRY_EVERY_ROUNDS,
  MAX_QUEUED_SIGNALS,
  schedulerSettings,
  type CarrierSchedulerArgs,
  type SchedulerPatches,
  type SchedulerSettings,
} from './schedulerSettings.js';

/** A run the scheduler starts as a child after a round: one card's `cardCheck`, or a `cardBatch`. */
export type Launch =
  | { readonly kind: 'card'; readonly card: ClaimedCard; readonly claimedAt: number; readonly dueHorizonMs: number }
  | { readonly kind: 'batch'; readonly batch: CardBatch; readonly tokenPrefix: string; readonly claimedAt: number; readonly dueHorizonMs: number };

/** What follows a claim round: the scheduler ends, or goes on after starting these runs (in order). */
export type RoundOutcome =
  | { readonly kind: 'stop'; readonly reason: string }
  | { readonly kind: 'goOn'; readonly launches: readonly Launch[] }
  /** The deployment claims in a loop activity (SCHEDULER_LOOP=activity): the run hands its claiming over. */
  | { readonly kind: 'handOver' };

/** Whether the run continues as new now: not yet, now, or now although children still run (the drain timed out). */
export type ContinueAsNewDecision = 'notYet' | 'now' | 'nowLeavingChildren';

/** What the workflow knows about its own history at the end of a tick. */
export interface HistoryInfo {
  readonly historyLength: number;
  readonly historySize: number;
  readonly continueAsNewSuggested: boolean;
  /** Another worker-deployment version became current for this pinned run (versionUpgrade.ts). */
  readonly targetVersionChanged: boolean;
}

/** The run's identity: its claim tokens and its children's ClaimedBy attribute name it. */
export interface SchedulerRun {
  readonly workflowId: string;
  readonly runId: string;
  /** What the claim tokens' prefixes start with instead of the run id: a claim loop's generation (each lap claims under its own). */
  readonly tokenRunId?: string;
}

const round1 = (value: number): number => Math.round(value * 10) / 10;
/**
 * An account counts as wanting more of a saturated engine for this many rounds after one the
 * engine held back: under overload an account's rounds alternate between `orchestration` and
 * `budget` (calls waiting on the limiter), and one counted content in its `budget` rounds left
 * its share to the others (overload bench, child mode: 1.15 / 1.15 / 0.89 of the budget shares,
 * the largest account limited by budget in 21 of 58 samples).
 */
const WANTING_ROUNDS = 5;

/**
 * How far ahead of due to claim: the mean start lag the engine shows now, plus half a tick (a card
 * that falls due between two rounds waits for the next one). The claim activity bounds it.
 */
export const lookahead = (state: InflightControlState, tickMs: number): number => Math.round(state.startLagMs + tickMs / 2);

export class SchedulerState {
  readonly settings: SchedulerSettings;
  /** The loop's failures and backoff (loopFailures adds the log and the metric). */
  readonly failures: FailureStreak;
  readonly signals: SignalQueue;
  readonly starts: ChildStarts;
  /** `<scheduler workflow id>/<run id>`: the ClaimedBy of every run this one starts. */
  readonly claimedBy: string;
  private readonly cardRuns: CardRunPlacement;
  private readonly carrierId: string;
  private readonly runId: string;
  private paused: boolean;
  private refreshConfig = true;
  private rounds: number;
  private lastRoundAt: number | undefined;
  private round: { readonly tokenPrefix: string; readonly at: number; readonly sinceLastRoundMs: number } | undefined;
  private status: SchedulerStatus;
  // Claiming bounded by what the engine runs (see workflow-safe/inflightControl): state kept across rounds and runs.
  private inflight: InflightControlState | undefined;
  // Continue-as-new in two phases. `drainingSince`: the history is large enough; rounds go on, but
  // their runs are started by the claim activity (no new children), until the children already
  // started have completed (bounded by CHILD_DRAIN_MAX_MS). `closing`: the last step. Accepted
  // updates must finish in the run that accepted them, so a steady stream of them would keep the
  // run from ever rolling over: from here new ones are rejected as `scheduler_continuing_as_new`
  // and the client (temporalControl.requestCheck) retries them against the next run.
  private drainingSince: number | undefined;
  private closing = false;
  private wake = false;
  /** The last round the engine held back (`orchestration`): the account wants more of the engine for a few rounds after. */
  private heldBackRound: number | undefined;
  /** The account's lease as the last claim reported it (undefined before the first): when to hold a waiting start's claim. */
  private leaseMs: number | undefined;
  /** The last round found nothing due nor in flight: it may sleep this long after the round (see waitMs). */
  private idleMs: number | undefined;
  private configChangeCount = 0;

  constructor(args: CarrierSchedulerArgs, run: SchedulerRun, patches: SchedulerPatches) {
    this.settings = schedulerSettings(args, patches);
    this.failures = new FailureStreak(this.settings.tickMs);
    this.signals = new SignalQueue(args.pendingRequests ?? [], this.settings.maxSignalsPerTick, MAX_QUEUED_SIGNALS);
    this.starts = new ChildStarts(args.counters?.startFailures ?? 0);
    this.carrierId = args.carrierId;
    this.runId = run.tokenRunId ?? run.runId;
    this.claimedBy = `${run.workflowId}/${run.runId}`;
    this.cardRuns = { taskQueues: args.taskQueues, workflowIdPrefix: args.workflowIdPrefix ?? '', claimedBy: this.claimedBy };
    this.paused = args.paused ?? false;
    this.rounds = args.rounds ?? 0;
    this.inflight = args.inflightControl;
    this.status = {
      carrierId: args.carrierId,
      paused: this.paused,
      mode: 'claiming',
      rounds: this.rounds,
      running: 0,
      claimedLastTick: 0,
      expiredLeases: args.counters?.expiredLeases ?? 0,
      startFailures: this.starts.failures,
      lanes: { priority: 0, normal: 0 },
      groups: [],
      orchestration: { limitedBy: 'none', inflightLimit: 0, configuredInflightLimit: 0, startsPerSec: 0, startLagMs: 0, baseLagMs: null, capacityPerSec: null },
    };
  }

  // ---- Messages ----

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
  }

  /**
   * The account changed: the next claim re-reads it from PostgreSQL; a loop sleeping past its tick
   * claims at once (its cards' due times may have moved earlier). A ticking one waits for its next
   * tick, as runs recorded before the idle sleep did (their replay must wait alike).
   */
  configChanged(): void {
    this.refreshConfig = true;
    this.configChangeCount += 1;
    if (this.idleMs !== undefined) this.wake = true;
  }

  /** A card of the account was made due before the sleeping loop's wake-up (wakeSignal): claim at once. */
  wakeUp(): void {
    this.wake = true;
  }

  /** A request-check signal: queued when valid; throws (RequestCheckInvalid) when not, for the workflow to log and drop. */
  /** Queues a valid request-check signal (an invalid one throws); false when the queue is full ({@link MAX_QUEUED_SIGNALS}). */
  queueSignal(request: RequestCheckInput): boolean {
    validateRequestCheck(request);
    return this.signals.push(request);
  }

  /** The update's validator: rejects an invalid request, and any request once the run is closing (the client retries on the next run). */
  admitUpdate(request: RequestCheckInput): void {
    validateRequestCheck(request);
    if (this.closing) throw ApplicationFailure.nonRetryable('carrierScheduler is continuing as new; retry', SCHEDULER_CONTINUING_AS_NEW);
  }

  /**
   * A request-check was served. A card put in the priority lane is claimed at once instead of at
   * the next tick: after an update always; after a signal only in claim-first runs, whose claim
   * already ran (older runs handled their signals before the claim of the same tick).
   */
  requestServed(result: RequestCheckResult, via: 'update' | 'signal'): void {
    if (result.requested > 0 && (via === 'update' || this.settings.claimsFirst)) this.wake = true;
  }

  /** The priorityRequested update's validator: refused once the run is closing (its next run claims the card anyway). */
  admitWake(): void {
    if (this.closing) throw ApplicationFailure.nonRetryable('carrierScheduler is continuing as new', SCHEDULER_CONTINUING_AS_NEW);
  }

  /** A request-check its caller served (priorityRequested update): claim at once, as after a served update. */
  requestedElsewhere(): void {
    this.wake = true;
  }

  /**
   * A claim loop's lap ended (SCHEDULER_LOOP=activity): the rounds, in-flight state and counters it
   * carried on are this run's now (the next lap, and the next run, go on from them).
   */
  lapEnded(lap: {
    readonly rounds: number;
    readonly inflightControl?: InflightControlState;
    readonly counters: { readonly expiredLeases: number; readonly startFailures: number };
  }): void {
    this.rounds = lap.rounds;
    if (lap.inflightControl !== undefined) this.inflight = lap.inflightControl;
    this.starts.refusedByClaim(lap.counters.startFailures - this.starts.failures);
    this.status = { ...this.status, rounds: lap.rounds, expiredLeases: lap.counters.expiredLeases, startFailures: this.starts.failures };
  }

  /** Configuration changes seen so far: a claim loop activity is started again (it re-reads the account) when this moves. */
  get configChanges(): number {
    return this.configChangeCount;
  }

  /** The status query's answer. */
  view(): SchedulerStatus {
    return { ...this.status, paused: this.paused, ...this.failures.view() };
  }

  // ---- The tick ----

  get isPaused(): boolean {
    return this.paused;
  }

  /** A round starts (unless paused): its claim's input. Rounds count on across runs; the token prefix names the run and round. */
  beginRound(now: number): ClaimRoundInput {
    this.rounds += 1;
    const sinceLastRoundMs = this.lastRoundAt === undefined ? this.settings.tickMs : now - this.lastRoundAt;
    this.lastRoundAt = now;
    const tokenPrefix = `${this.runId}.${this.rounds}`;
    this.round = { tokenPrefix, at: now, sinceLastRoundMs };
    const inflight = this.inflight;
    const holdClaims = this.leaseMs === undefined ? [] : this.starts.claimsToHold(now, this.leaseMs);
    return {
      carrierId: this.carrierId,
      tokenPrefix,
      refreshConfig: this.refreshConfig,
      sinceLastRoundMs,
      roundAt: now,
      ...(inflight === undefined
        ? {}
        : {
            adaptiveLimit: inflightLimitOf(inflight),
            lookaheadMs: lookahead(inflight, this.settings.tickMs),
            engineShare: {
              startsPerSec: inflight.startsPerSec,
              wanting: this.heldBackRound !== undefined && this.rounds - this.heldBackRound <= WANTING_ROUNDS,
            },
          }),
      // A draining run starts no children: the claim starts the round's runs itself.
      ...(this.drainingSince === undefined ? {} : { startRuns: true }),
      cardRuns: this.cardRuns,
      ...(holdClaims.length === 0 ? {} : { holdClaims }),
    };
  }

  /** The claim answered: the account was read afresh if asked. */
  claimSucceeded(): void {
    this.refreshConfig = false;
  }

  /** The round's result (undefined: the claim failed): the status it reports and the runs to start. */
  endRound(result: ClaimRoundResult | undefined): RoundOutcome {
    const round = this.round;
    if (round === undefined) throw new Error('endRound without beginRound');
    const rounds = this.rounds;
    this.idleMs = result?.kind === 'claimed' ? result.idleMs : undefined;
    if (result === undefined) {
      this.status = { ...this.status, mode: 'degraded', rounds, claimedLastTick: 0 };
      return { kind: 'goOn', launches: [] };
    }
    if (result.kind === 'stop') return { kind: 'stop', reason: result.reason };
    if (result.kind === 'handOver') return { kind: 'handOver' };
    if (result.kind === 'idle') {
      this.status = { ...this.status, mode: 'idle', rounds, claimedLastTick: 0 };
      return { kind: 'goOn', launches: [] };
    }
    this.leaseMs = result.leaseMs;
    const claimedAt = round.at;
    const dueHorizonMs = result.dueHorizonMs ?? 0;
    // The claim started the runs itself (client start mode, or a draining run): nothing to start here;
    // or those of the priority lane (child start mode): the others.
    // CARD_RUN_SHAPE=batch: one cardBatch run per batch of the round (priority batches first).
    const toStart = result.priorityStartedByClaim === true ? result.claimed.filter((card) => !card.fromPriority) : result.claimed;
    const launches: Launch[] = result.startedByClaim
      ? []
      : result.runShape === 'batch'
        ? cardBatches(toStart, result.batchSize ?? DEFAULT_CARD_BATCH_SIZE).map((batch) => ({
            kind: 'batch' as const,
            batch,
            tokenPrefix: round.tokenPrefix,
            claimedAt,
            dueHorizonMs,
          }))
        : toStart.map((card) => ({ kind: 'card' as const, card, claimedAt, dueHorizonMs }));
    this.starts.refusedByClaim(result.startFailures);
    const inflight = nextInflightControl(this.inflight ?? initialInflightControl(result.maxInflightLimit, result.budgetQps), {
      ...result.engine,
      elapsedMs: round.sinceLastRoundMs,
      limitedBy: result.limitedBy,
      maxLimit: result.maxInflightLimit,
      budgetQps: result.budgetQps,
      leaseMs: result.leaseMs,
      fairRatePerSec: result.fairRatePerSec ?? null,
    });
    this.inflight = inflight;
    // Held back by its limit while the engine queues its runs (not a ramp on an idle engine).
    if (result.limitedBy === 'orchestration' && engineQueues(inflight)) this.heldBackRound = this.rounds;
    this.status = {
      ...this.status,
      mode: 'claiming',
      rounds,
      running: result.running,
      claimedLastTick: result.claimed.length,
      expiredLeases: this.status.expiredLeases + result.expired,
      startFailures: this.starts.failures,
      lanes: result.lanes,
      groups: result.groups,
      orchestration: {
        limitedBy: result.limitedBy,
        inflightLimit: inflightLimitOf(inflight),
        configuredInflightLimit: result.maxInflightLimit,
        startsPerSec: round1(inflight.startsPerSec),
        startLagMs: Math.round(inflight.startLagMs),
        ...(inflight.queueLagMs === undefined ? {} : { queueLagMs: Math.round(inflight.queueLagMs) }),
        baseLagMs: inflight.baseLagMs == null ? null : Math.round(inflight.baseLagMs),
        capacityPerSec: inflight.capacityPerSec === null ? null : round1(inflight.capacityPerSec),
        ...(result.fairRatePerSec === undefined ? {} : { fairRatePerSec: round1(result.fairRatePerSec) }),
      },
    };
    return { kind: 'goOn', launches };
  }

  /** Every few rounds (not while paused): sweep the priority items whose retry is due. */
  priorityRetryDue(): boolean {
    // An idle round sweeps too: the loop may sleep for a minute before its next one.
    return !this.paused && (this.rounds % PRIORITY_RETRY_EVERY_ROUNDS === 0 || this.idleMs !== undefined);
  }

  /** The next batch of signals to handle beside the loop; none while one is under way or while draining. */
  nextSignalBatch(): RequestCheckInput[] | undefined {
    // A run about to continue as new starts no batch and waits for the one under way (its rounds
    // go on), so no request is cut off mid-way and sent again by the next run.
    if (this.drainingSince !== undefined) return undefined;
    return this.signals.takeBatch();
  }

  // ---- Continue-as-new ----

  get draining(): boolean {
    return this.drainingSince !== undefined;
  }

  get isClosing(): boolean {
    return this.closing;
  }

  /** The end of a tick: the run starts draining once its history is large enough, the server suggests it, or its version is no longer current. */
  observeHistory(info: HistoryInfo, now: number): void {
    if (this.drainingSince !== undefined) return;
    const { maxHistoryEvents, maxHistoryBytes } = this.settings;
    if (info.historyLength >= maxHistoryEvents || info.historySize >= maxHistoryBytes || info.continueAsNewSuggested || info.targetVersionChanged) {
      this.drainingSince = now;
    }
  }

  /**
   * Whether to continue as new now: once draining, no signal batch is under way, and its children
   * have completed or the drain has lasted CHILD_DRAIN_MAX_MS and they have gone quiet (no
   * completion for CHILD_DRAIN_QUIET_MS), or it has lasted CHILD_DRAIN_HARD_MAX_MS. A run without
   * the quiet-drain patch leaves them after CHILD_DRAIN_MAX_MS; one without the drain patch
   * continues as new at once, as it did then.
   */
  continueAsNewDecision(now: number): ContinueAsNewDecision {
    // (No batch is ever under way in a run without the claim-first patch: it handles its signals inside the tick.)
    if (this.drainingSince === undefined || this.signals.batchRunning) return 'notYet';
    if (!this.settings.drainsChildren) return 'now';
    if (this.starts.drained) return 'now';
    const drainedFor = now - this.drainingSince;
    if (drainedFor < CHILD_DRAIN_MAX_MS) return 'notYet';
    if (!this.settings.drainsUntilQuiet || drainedFor >= CHILD_DRAIN_HARD_MAX_MS) return 'nowLeavingChildren';
    const lastCompletion = this.starts.lastCompletionAt;
    return lastCompletion === undefined || now - lastCompletion >= CHILD_DRAIN_QUIET_MS ? 'nowLeavingChildren' : 'notYet';
  }

  /** The last step: from here, updates are rejected (see admitUpdate). */
  close(): void {
    this.closing = true;
  }

  /** The next run's input: this one's, with the state it carries (queued signals, paused flag, rounds, counters, in-flight state). */
  nextRunArgs(args: CarrierSchedulerArgs): CarrierSchedulerArgs {
    return {
      ...args,
      paused: this.paused,
      rounds: this.rounds,
      pendingRequests: this.signals.carried(),
      ...(this.inflight === undefined ? {} : { inflightControl: this.inflight }),
      counters: { expiredLeases: this.status.expiredLeases, startFailures: this.starts.failures },
    };
  }

  // ---- The wait between ticks ----

  /**
   * After a failure, the backoff (a new signal does not cut it short); else the rest of the tick, at
   * least 1 ms — or, after a round that found nothing due nor in flight, until the next due time
   * the claim reported (a wake, a signal or an update ends it sooner), unless anything of the
   * loop's own is still under way: signals, child starts, claims to give back, the drain.
   */
  waitMs(now: number, tickStart: number): number {
    const tick = Math.max(1, this.settings.tickMs - (now - tickStart));
    const backoff = this.failures.backoffMs();
    if (backoff !== undefined) return backoff;
    if (this.idleMs === undefined || this.round === undefined || !this.mayIdle()) return tick;
    return Math.max(tick, this.idleMs - (now - this.round.at));
  }

  private mayIdle(): boolean {
    return (
      !this.paused &&
      this.drainingSince === undefined &&
      !this.signals.batchRunning &&
      !this.signals.hasQueued &&
      this.starts.startsInFlight === 0 &&
      !this.starts.hasReleases
    );
  }

  /** A served request put a card in the priority lane: the loop wakes for the next claim. */
  get wakeEarly(): boolean {
    return this.wake;
  }

  /** Claim-first runs: a new signal is taken up at once, beside the loop, when no batch is under way, the run is not draining and not backing off. */
  signalToTake(): boolean {
    return !this.signals.batchRunning && this.drainingSince === undefined && this.signals.hasNew && this.failures.backoffMs() === undefined;
  }

  /** Runs before the claim-first patch: a new signal (unless backing off) or a served request ends the wait. */
  legacyWake(): boolean {
    return (this.signals.hasNew && this.failures.backoffMs() === undefined) || this.wake;
  }

  tickEnded(): void {
    this.wake = false;
  }
}
