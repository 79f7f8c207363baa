/**
 * Activities of the `polling-control` task queue: the claim round of a carrier account, claim
 * release for children that could not start, request-checks, the mode switch and the list of
 * accounts to schedule.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Pool } from '../db/pool.js';
import { listCarriers } from '../db/carriers.js';
import { listDuePriorityRetries, nextPriorityRetryInMs } from '../db/priorityItems.js';
import { STOPPED_LOOP, type CarrierQueueStore } from '../redis/carrierQueueStore.js';
import type { RedisRateLimiter } from '../ratelimit/limiter.js';
import {
  FAILED_START_RETRY_MS,
  type ClaimRelease,
  type ClaimRoundInput,
  type ClaimRoundResult,
  type ClaimedCard,
  type GroupBudgetView,
} from '../workflow-safe/claimRound.js';
import type { PollingMode } from '../workflow-safe/pollingMode.js';
import type { RequestCheckInput, RequestCheckResult } from '../workflow-safe/requestCheck.js';
import { inflightLimitOf, initialInflightControl, limitingFactor } from '../workflow-safe/inflightControl.js';
import { fairEngineRate } from '../workflow-safe/engineShare.js';
import type { CardStarter } from '../app/cardStarter.js';
import type { SchedulerStarter } from '../app/schedulerStarter.js';
import type { CarrierSchedulerArgs } from '../workflows/scheduler/schedulerSettings.js';
import type { BackgroundWork } from './backgroundWork.js';
import type { ModeSwitcher, RedisGuard, RequestChecker } from '../app/ports.js';
import { DEFAULT_CARD_BATCH_SIZE, type CardRunShape } from '../workflow-safe/cardBatches.js';
import type { IngestPressure } from '../ingest/pressure.js';
import type { ReferenceData } from '../runtime/referenceData.js';
import type { ActivityMetrics } from '../runtime/metrics.js';
import { isDatabaseUnreachable } from '../runtime/databaseErrors.js';
import { eachLimited } from '../runtime/eachLimited.js';
import { maintainStorage, type MaintenanceResult, type RetentionPolicy } from '../db/retention.js';
import { writeAudit } from '../db/audit.js';
import { isDomainError } from '../domain/errors.js';
import { REQUEST_CHECK_REJECTED, RequestCheckInvalid, type RequestCheckRejection } from '../workflow-safe/requestCheckValidation.js';
import { describeFailure, sqlState } from '../db/errors.js';
import type { ClaimLoopInput, ClaimLoopLap, SchedulerLoop } from '../workflow-safe/claimLoop.js';
import { runClaimLoop } from './claimLoop.js';

export interface ControlActivityDeps {
  readonly pool: Pool;
  readonly store: CarrierQueueStore;
  readonly limiter: RedisRateLimiter;
  readonly reference: ReferenceData;
  readonly requests: RequestChecker;
  readonly modes: ModeSwitcher;
  readonly redisGuard?: RedisGuard;
  readonly metrics?: ActivityMetrics;
  /**
   * Upper bound on claims in flight per account from this deployment's card capacity (workers ×
   * slots). The running set includes cards whose workflow has not started yet, so a backlog on
   * the card task queue shrinks what the next round may claim.
   */
  readonly cardCapacity?: number;
  /**
   * Starts claimed cards' runs with the client. Used for every round in client start mode, and in
   * child start mode for the rounds of a scheduler run that is about to continue as new
   * (`ClaimRoundInput.startRuns`).
   */
  readonly cardStarter?: CardStarter;
  /**
   * Where a round's run starts go on once the round has waited {@link ControlActivityDeps.startWaitMs}
   * for them (the process awaits them before it closes its connections). Without it the round
   * waits for every start.
   */
  readonly background?: BackgroundWork;
  /** How long a round waits for its run starts before it returns (default {@link START_WAIT_MS}). */
  readonly startWaitMs?: number;
  /** CARD_START_MODE; `client` when a starter is given and this is not (tests build deps directly). */
  readonly cardStartMode?: 'child' | 'client';
  /** CARD_RUN_SHAPE and CARD_BATCH_SIZE, for the scheduler's child starts (default `card`). */
  readonly runShape?: CardRunShape;
  readonly batchSize?: number;
  /** Ingest backpressure: a high ingest backlog shrinks every account's in-flight limit. */
  readonly ingestPressure?: IngestPressure;
  /** What storage maintenance keeps and creates ahead (defaults: {@link DEFAULT_RETENTION}). */
  readonly retention?: RetentionPolicy;
  /**
   * The accounts whose scheduler runs (Temporal visibility): pollingControl's reconcile starts
   * schedulers only for the others. Absent: it tries every enabled account, as before.
   */
  readonly runningSchedulers?: () => Promise<ReadonlySet<string>>;
  /** Starts schedulers with the client, for pollingControl's reconcile (src/app/schedulerStarter.ts). */
  readonly schedulerStarter?: SchedulerStarter;
  /**
   * SCHEDULER_IDLE_MAX_MS: the longest an account's scheduler sleeps after a round that found
   * nothing due and nothing in flight (until its next due time, or a wake). 0 or absent: it ticks
   * every round, busy or idle.
   */
  readonly idleMaxMs?: number;
  /**
   * SCHEDULER_LOOP: `activity` hands every scheduler's claiming to a claim loop activity
   * (src/activities/claimLoop.ts); `workflow` or absent: a claim round per workflow task.
   */
  readonly schedulerLoop?: SchedulerLoop;
  /** With worker versioning: whether another version became current, for the claim loop laps (src/workers/currentVersionWatch.ts). */
  readonly currentVersionLeft?: () => Promise<boolean>;
}

/** Three months kept, partitions three months ahead: a month without its partition is a failure to notice. */
export const DEFAULT_RETENTION: RetentionPolicy = { keepMonths: 3, monthsAhead: 3 };

/**
 * How long a claim round waits for the runs it starts with the client before it returns; the
 * starts still under way finish in the background and give back the claims of those that fail.
 * A round that waited for all of them was as long as its slowest start: in the overload bench
 * (client mode, 2026-12-06) rounds took 0.9-1.3 s at p90 and 2.0-3.1 s when the dev server held
 * every start at once, and the next round — the next request-check's claim too — waited for them.
 * Claims still starting count as in flight, so the in-flight limit bounds what piles up.
 */
export const START_WAIT_MS = 500;

/**
 * Priority items one retry sweep requests again at most, and how many at once: a sweep runs inside
 * the scheduler's loop every few rounds, and a backlog (hundreds deferred under carrier pushback)
 * is worked off over several sweeps instead of holding one round for seconds.
 */
export const PRIORITY_SWEEP_MAX_ITEMS = 100;
const PRIORITY_SWEEP_CONCURRENCY = 8;

/** A sleep shorter than this saves next to nothing over the tick: the scheduler keeps ticking. */
export const MIN_IDLE_SLEEP_MS = 2000;

/** Upper bound on how many seconds of budget one late round may plan for. */
const MAX_ROUND_BUDGET_SECONDS = 3;

/**
 * Room the priority lane has above the in-flight limit the engine or ingest imposes (never above the
 * configured one): a share of that limit, at least {@link MIN_PRIORITY_HEADROOM}. Under overload the
 * adaptive limit is full all the time, and without it a request-check waited for enough of its
 * account's runs to finish before it could be claimed (the overload bench's request → run p99: 6.3 s).
 */
const PRIORITY_HEADROOM_SHARE = 0.25;
const MIN_PRIORITY_HEADROOM = 2;

/** What the account has in Redis before its claim: claims in flight, and cards in the priority lane (waiting or claimed). */
export interface PriorityOccupancy {
  readonly running: number;
  readonly priorityLane: number;
}

/**
 * The priority lane's in-flight limit: `limit` plus the headroom, at most `maxLimit`, never below
 * `limit`. With `occupancy`, and no more cards in the priority lane (waiting or running) than the
 * headroom, each of them may be claimed now however far the running set already is past that: the
 * adaptive limit can fall below what is running (a lease guard cut, claims still starting), and
 * the requests then waited for the account's runs to drain first (overload bench, client mode:
 * rounds woken by a request claimed nothing for 1.3-2.6 s with 27 running). A larger priority
 * lane (a bulk request) keeps to the headroom, so the extra room never exceeds it.
 */
export function priorityInflightLimit(limit: number, maxLimit: number, occupancy?: PriorityOccupancy): number {
  const headroom = Math.max(MIN_PRIORITY_HEADROOM, Math.ceil(limit * PRIORITY_HEADROOM_SHARE));
  const withHeadroom = Math.max(limit, Math.min(maxLimit, limit + headroom));
  if (occupancy === undefined || occupancy.priorityLane === 0 || occupancy.priorityLane > headroom) return withHeadroom;
  return Math.max(withHeadroom, Math.min(maxLimit, occupancy.running + occupancy.priorityLane));
}

/** Upper bound on how early a card is claimed before its due time. */
export const MAX_DUE_HORIZON_MS = 5000;

/**
 * How far ahead of due a round claims: the scheduler's lookahead (the engine's start lag), at most
 * {@link MAX_DUE_HORIZON_MS}, a quarter of the lease (a claimed card's lease end stays past the
 * horizon, out of the round's due range) and half the shortest polling interval (a check made
 * early keeps the card's phase: its next due is one interval after the due it served, so the
 * period does not shrink; half keeps a check from being nearer the previous one than the next).
 */
export function dueHorizon(lookaheadMs: number, leaseMs: number, shortestIntervalMs: number | null): number {
  const bounds = [MAX_DUE_HORIZON_MS, leaseMs / 4, shortestIntervalMs === null ? Number.POSITIVE_INFINITY : shortestIntervalMs / 2];
  return Math.max(0, Math.floor(Math.min(lookaheadMs, ...bounds)));
}

/**
 * A request-check no retry can fix: our validation or domain rules refused it, or PostgreSQL
 * refused its data (class 22, data exception: e.g. 22003, an id beyond bigint). Anything else —
 * the database or Redis away, a deadlock, a timeout — may pass on a later try, and so does a
 * `conflict`: two requests creating the card's priority item at once, the second merges on retry.
 */
export function isRejectedRequestCheck(error: unknown): boolean {
  if (isDomainError(error)) return error.code !== 'conflict';
  return error instanceof RequestCheckInvalid || sqlState(error)?.startsWith('22') === true;
}

function rejectionDetails(error: unknown): RequestCheckRejection {
  if (isDomainError(error)) return { code: error.code === 'not_found' ? 'not_found' : 'invalid', ...(error.field === undefined ? {} : { field: error.field }) };
  if (error instanceof RequestCheckInvalid) return { code: 'invalid', field: error.field };
  return { code: 'invalid' };
}

/** This activity's attempt number; 1 outside an activity (direct calls in tests). */
function activityAttempt(): number {
  try {
    return Context.current().info.attempt;
  } catch {
    return 1;
  }
}

/**
 * Publishes the account's execution rate in the engine share table and returns its fair rate of a
 * saturated engine (src/workflow-safe/engineShare.ts); null when the engine holds nobody back, or
 * the scheduler sent no rate (its first round, older code).
 */
async function fairRateOf(store: CarrierQueueStore, input: ClaimRoundInput, budgetQps: number): Promise<number | null> {
  if (input.engineShare === undefined) return null;
  const at = Date.now();
  const entries = await store.shareEngine({
    carrierId: input.carrierId,
    startsPerSec: input.engineShare.startsPerSec,
    weight: budgetQps,
    wanting: input.engineShare.wanting,
    at,
  });
  return fairEngineRate(entries, input.carrierId, at);
}

export function createControlActivities(deps: ControlActivityDeps) {
  // Start failures of rounds that returned before their starts ended, per account: the account's
  // next round here reports them (a round on another worker process does not).
  const lateStartFailures = new Map<string, number>();
  const takeLateStartFailures = (carrierId: string): number => {
    const failures = lateStartFailures.get(carrierId) ?? 0;
    lateStartFailures.delete(carrierId);
    return failures;
  };
  /** One claim round; `attempt` > 1 makes it a retry of the same round (its claims under the prefix are handed back first). */
  const claimRound = async (input: ClaimRoundInput, attempt: number): Promise<ClaimRoundResult> => {
    if (input.refreshConfig) deps.reference.invalidate();
    const carrier = await deps.reference.carrier(input.carrierId, input.refreshConfig);
    if (!carrier) return { kind: 'stop', reason: 'carrier_missing' };
    if (!carrier.enabled) return { kind: 'stop', reason: 'carrier_disabled' };
    if ((await deps.reference.pollingMode()) === 'legacy') {
      // Idle on purpose: the scheduler is alive, only not claiming.
      deps.metrics?.schedulerRound(input.carrierId);
      return { kind: 'idle', reason: 'legacy_mode' };
    }
    const groupNames = carrier.groups.map((g) => g.name);
    // A late round plans for the seconds it covers (capped), so slow ticks do not waste budget.
    const scale = Math.min(Math.max((input.sinceLastRoundMs ?? 1000) / 1000, 1), MAX_ROUND_BUDGET_SECONDS);
    // One peek per group gives both the round's budget and the effective rate shown in status.
    const { budget, rates } = await deps.limiter.roundView(input.carrierId, groupNames, scale);
    const maxInflightLimit = Math.min(carrier.inflightLimit, deps.cardCapacity ?? Number.POSITIVE_INFINITY);
    const budgetQps = carrier.groups.reduce((sum, g) => sum + g.qps, 0);
    // A scheduler's first round has no adaptive limit yet: the controller's first one, not the
    // configured limit — 200 runs at once from each of the bench's two capacity accounts queued
    // for up to 18 s on a 20 s lease, and the lease guard's cut to 2 left them crawling back.
    const adaptiveLimit = input.adaptiveLimit ?? inflightLimitOf(initialInflightControl(maxInflightLimit, budgetQps));
    const engineLimit = Math.min(maxInflightLimit, adaptiveLimit);
    const inflightLimit = deps.ingestPressure ? await deps.ingestPressure.inflightLimit(engineLimit) : engineLimit;
    const starter = deps.cardStarter && (input.startRuns === true || (deps.cardStartMode ?? 'client') === 'client') ? deps.cardStarter : undefined;
    // Child start mode, card shape: the priority lane's runs are started here, not as children. A
    // child starts through its scheduler's history, behind every child start of that scheduler
    // before it: under overload that held request-checks for seconds (overload bench, child mode:
    // request → run started p99 11.5 s, the account's runs' start lag 3.7 s on a 0.4 s queue lag).
    const priorityStarter = starter === undefined && (deps.runShape ?? 'card') === 'card' ? deps.cardStarter : undefined;
    const intervals = await deps.reference.intervals();
    const dueHorizonMs = dueHorizon(input.lookaheadMs ?? 0, carrier.leaseMs, intervals.shortestMs());
    // Before the claim, which reclaims expired leases: the claims of children the server has not
    // started yet are held for another lease (lua/holdClaims.lua). The lanes' depths size the
    // priority lane's limit.
    const [claimsHeld, occupancy] = await Promise.all([
      input.holdClaims === undefined ? undefined : deps.store.holdClaims(input.carrierId, input.holdClaims, carrier.leaseMs),
      deps.store.depths(input.carrierId),
    ]);
    const [engine, fairRatePerSec, result] = await Promise.all([
      deps.store.takeStartStats(input.carrierId),
      fairRateOf(deps.store, input, budgetQps),
      deps.store.claim({
        carrierId: input.carrierId,
        leaseMs: carrier.leaseMs,
        inflightLimit,
        priorityInflightLimit: priorityInflightLimit(inflightLimit, maxInflightLimit, { running: occupancy.running, priorityLane: occupancy.priority }),
        priorityRatio: carrier.priorityRatio,
        tokenPrefix: input.tokenPrefix,
        groupBudget: budget,
        typeGroups: { ...carrier.typeGroups },
        countRealname: carrier.realnameControl,
        // A round's token prefix is deterministic (scheduler run + round), so a second claim with
        // it is a retry: of this local activity, or of the whole round after the scheduler's
        // workflow task failed or timed out (its child starts were lost with it, the claims were
        // not). Either way the claims already made under the prefix are handed back, not left
        // to their lease. Client start mode recovers only on an activity retry: runs its first
        // attempt started would be started again.
        retry: attempt > 1 || starter === undefined,
        dueHorizonMs,
        // Dues of other types are left over from an older config: dropped, not budgeted.
        polledTypes: intervals.typesPolledBy(input.carrierId),
      }),
    ]);
    const claimed = result.claimed.map((c): ClaimedCard => ({ cardId: c.cardId, token: c.token, fromPriority: c.fromPriority }));
    // Starts the runs of `cards` with `cardStarter`; those that could not start are given back at once.
    const startRuns = async (cardStarter: CardStarter, cards: ClaimedCard[]): Promise<number> => {
      if (cards.length === 0) return 0;
      const failed = await cardStarter.start({
        carrierId: input.carrierId,
        cards,
        placement: input.cardRuns,
        dueHorizonMs,
        tokenPrefix: input.tokenPrefix,
        ...(input.roundAt === undefined ? {} : { roundAt: input.roundAt }),
      });
      for (const card of failed) await deps.store.release(input.carrierId, card.cardId, card.token, undefined, FAILED_START_RETRY_MS);
      return failed.length;
    };
    const priorityClaims = priorityStarter ? claimed.filter((card) => card.fromPriority) : [];
    const starts = (async () => (starter ? await startRuns(starter, claimed) : 0) + (priorityStarter ? await startRuns(priorityStarter, priorityClaims) : 0))();
    const startsNow = deps.background === undefined ? await starts : await within(starts, deps.startWaitMs ?? START_WAIT_MS);
    if (startsNow === undefined)
      deps.background?.track(
        `starting the runs of claim round ${input.tokenPrefix}`,
        starts.then((failures) => {
          if (failures > 0) lateStartFailures.set(input.carrierId, (lateStartFailures.get(input.carrierId) ?? 0) + failures);
        }),
      );
    const startFailures = (startsNow ?? 0) + takeLateStartFailures(input.carrierId);
    const [depths, dueLeft] = await Promise.all([deps.store.depths(input.carrierId), deps.store.dueNowCount(input.carrierId)]);
    const groups: GroupBudgetView[] = carrier.groups.map((g) => ({
      name: g.name,
      qpsConfigured: g.qps,
      qpsEffective: rates[g.name] ?? g.qps,
      remaining: budget[g.name] ?? 0,
    }));
    const factor = limitingFactor({
      dueLeft,
      // What ran when the claim stopped, not after the round's starts: in client mode the round
      // waits up to START_WAIT_MS for them, and the runs that finished meanwhile made a round the
      // in-flight limit stopped look stopped by the budget — not held back by the engine, so the
      // engine share table left the account out of the fair split and gave its share to the
      // smaller ones (overload bench, client mode: the largest account "budget" in 34 of 59
      // samples at a third of its budget, the smallest at 1.11 × its budget share).
      running: Math.max(depths.running, occupancy.running - result.expired + result.claimed.length),
      limit: inflightLimit,
      adaptiveLimit,
      maxLimit: maxInflightLimit,
    });
    // Full at the limit backpressure cut: the ingest holds claiming back, not the engine.
    const limitedBy = inflightLimit < engineLimit && (factor === 'inflight' || factor === 'orchestration') ? 'ingest' : factor;
    // Nothing claimed, due or in flight: the scheduler may sleep until the lanes' next due time
    // (lua/markIdle.lua; an idle account then costs a round a minute, not a round a second).
    const quiet = claimed.length === 0 && startFailures === 0 && startsNow !== undefined && dueLeft === 0 && depths.running === 0;
    const idle = deps.idleMaxMs !== undefined && deps.idleMaxMs > 0 && quiet ? await idleFor(deps, input.carrierId, deps.idleMaxMs, dueHorizonMs) : 0;
    deps.metrics?.claimRound(input.carrierId, result.claimed.length, result.expired, depths.running, depths);
    deps.metrics?.orchestration(input.carrierId, { limitedBy, inflightLimit, groups });
    deps.metrics?.schedulerRound(input.carrierId);
    return {
      kind: 'claimed',
      claimed,
      expired: result.expired,
      running: depths.running,
      lanes: { priority: depths.priority, normal: depths.normal },
      groups,
      startedByClaim: starter !== undefined,
      ...(priorityClaims.length > 0 ? { priorityStartedByClaim: true } : {}),
      startFailures,
      ...(startsNow === undefined ? { startsPending: true } : {}),
      ...(claimsHeld === undefined ? {} : { claimsHeld }),
      engine,
      limitedBy,
      maxInflightLimit,
      budgetQps,
      leaseMs: carrier.leaseMs,
      dueHorizonMs,
      ...(fairRatePerSec === null ? {} : { fairRatePerSec }),
      runShape: deps.runShape ?? 'card',
      batchSize: deps.batchSize ?? DEFAULT_CARD_BATCH_SIZE,
      ...(idle > 0 ? { idleMs: idle } : {}),
    };
  };
  const requeueDuePriorityItems = async (carrierId: string): Promise<number> => {
    let due: Awaited<ReturnType<typeof listDuePriorityRetries>>;
    try {
      due = await listDuePriorityRetries(deps.pool, carrierId, PRIORITY_SWEEP_MAX_ITEMS);
    } catch (error) {
      // PostgreSQL unreachable: nothing to requeue until it answers (the items wait there). Failing
      // would hold the scheduler's loop in this local activity's retries every few rounds.
      if (isDatabaseUnreachable(error)) return 0;
      throw error;
    }
    // A few at a time (each is a transaction, an audit row and a Lua call): 500 in sequence held
    // the scheduler's loop for seconds under carrier pushback (issue 46).
    await eachLimited(due, PRIORITY_SWEEP_CONCURRENCY, (item) =>
      deps.requests
        .requestCheck(carrierId, { cardId: item.cardId, types: item.types, lane: item.lane, actor: 'carrierScheduler', source: 'priority-retry' })
        .then(() => undefined),
    );
    return due.length;
  };
  /** The enabled accounts, and those of them whose scheduler visibility does not list as running. */
  const listSchedulersToStart = async (): Promise<{ enabled: string[]; toStart: string[] }> => {
    const enabled = (await listCarriers(deps.pool, { enabledOnly: true })).map((c) => c.id);
    deps.metrics?.enabledAccounts(enabled);
    let running: ReadonlySet<string> = new Set();
    try {
      running = (await deps.runningSchedulers?.()) ?? running;
    } catch {
      running = new Set();
    }
    return { enabled, toStart: enabled.filter((id) => !running.has(id)) };
  };
  return {
    async claimRound(input: ClaimRoundInput): Promise<ClaimRoundResult> {
      // Claim loops run as activities here: the scheduler starts one instead of claiming (it claims nothing now).
      if (deps.schedulerLoop === 'activity') return { kind: 'handOver' };
      return claimRound(input, activityAttempt());
    },

    /** A lap of the account's claim loop (SCHEDULER_LOOP=activity): claims every tick until the lap is over, it is superseded or stopped, or the account is. */
    async runClaimLoop(input: ClaimLoopInput): Promise<ClaimLoopLap> {
      return runClaimLoop(
        {
          store: deps.store,
          claimRound: (round) => claimRound(round, 1),
          requeueDuePriorityItems,
          ...(deps.currentVersionLeft ? { currentVersionLeft: deps.currentVersionLeft } : {}),
          log: (message, fields) => {
            try {
              Context.current().log.warn(message, fields);
            } catch {
              // Outside an activity (direct calls in tests): nowhere to log.
            }
          },
        },
        input,
      );
    },

    /** Ends the account's claim loop at its next tick (pause, configuration change, continue-as-new): nothing claims until a new lap owns it. */
    async stopClaimLoop(input: { carrierId: string }): Promise<void> {
      await deps.store.ownClaimLoop(input.carrierId, STOPPED_LOOP);
    },

    /** Gives back the claims of runs that could not start; each is claimable again after its `retryAfterMs` (at most, and by default, FAILED_START_RETRY_MS). */
    async releaseClaims(input: { carrierId: string; cards: readonly ClaimRelease[] }): Promise<number> {
      let released = 0;
      for (const card of input.cards) {
        const retryAfterMs = Math.min(FAILED_START_RETRY_MS, Math.max(0, card.retryAfterMs ?? FAILED_START_RETRY_MS));
        if (await deps.store.release(input.carrierId, card.cardId, card.token, undefined, retryAfterMs)) released += 1;
      }
      return released;
    },

    /**
     * A request rejected for good fails non-retryable (type {@link REQUEST_CHECK_REJECTED}): no
     * retry of this activity nor of the scheduler's loop. A signal's request (`fromSignal`) has no
     * caller to tell, so it is audited on its card before the scheduler drops it.
     */
    async requestCheck(input: { carrierId: string; request: RequestCheckInput; fromSignal?: boolean }): Promise<RequestCheckResult> {
      try {
        return await deps.requests.requestCheck(input.carrierId, input.request);
      } catch (error) {
        if (!isRejectedRequestCheck(error)) throw error;
        const reason = describeFailure(error);
        if (input.fromSignal === true) {
          await writeAudit(deps.pool, {
            entityType: 'iot_card',
            entityId: String(input.request.cardId).slice(0, 100),
            action: 'request_check_dropped',
            actor: input.request.actor ?? 'signal',
            source: input.request.source ?? 'signal',
            reason,
            before: null,
            after: input.request,
          });
        }
        throw ApplicationFailure.create({
          message: reason,
          type: REQUEST_CHECK_REJECTED,
          nonRetryable: true,
          // What the API answers its caller with (src/api/errors.ts): the rejection's code and field.
          details: [rejectionDetails(error)],
          cause: error instanceof Error ? error : undefined,
        });
      }
    },

    /** Observation partitions ahead, data past retention gone (hourly, by the storageMaintenance schedule). */
    async maintainStorage(): Promise<MaintenanceResult> {
      // The database's clock decides the months, as it stamps the rows.
      const { rows } = await deps.pool.query<{ now: Date }>('SELECT now() AS now');
      return maintainStorage(deps.pool, deps.retention ?? DEFAULT_RETENTION, rows[0]?.now ?? new Date());
    },

    /**
     * Pending priority items whose retry is due (after a deferral, a retryable failure or a lost
     * lease) are requested again, so every item ends terminal or has a next run someone serves.
     * Returns how many were requested.
     */
    async requeueDuePriorityItems(input: { carrierId: string }): Promise<number> {
      return requeueDuePriorityItems(input.carrierId);
    },

    async readMode(): Promise<PollingMode> {
      return deps.reference.pollingMode(true);
    },

    async switchMode(input: { mode: PollingMode; actor: string }): Promise<{ changed: boolean }> {
      const result = await deps.modes.switchMode(input.mode, input.actor, () => Context.current().heartbeat());
      deps.reference.invalidate();
      return result;
    },

    /**
     * Heartbeats while it runs (a rebuild takes minutes for millions of cards): the heartbeat
     * timeout, not the 30-minute start-to-close, is what hands it to another worker when this one
     * dies — without it a control worker killed mid-call held pollingControl's reconcile loop, and
     * so every new account's scheduler and every rebuild after a Redis loss, for up to 30 minutes.
     */
    async ensureRedisIntact(): Promise<boolean> {
      if (!deps.redisGuard) return false;
      const guard = deps.redisGuard;
      return whileHeartbeating(() => guard.ensureIntact());
    },

    /**
     * The enabled accounts, and those of them whose scheduler does not run (to start): a reconcile
     * that tried to start every account's scheduler cost a child start command and its failure per
     * account every minute, and above ~1 000 accounts a continue-as-new at every reconcile (issue 45).
     * Visibility unreachable: every enabled account is tried, as before.
     */
    listSchedulersToStart,

    /**
     * Starts, with the client, the scheduler of every enabled account that visibility does not list
     * as running (`template` + its id): one activity for pollingControl's reconcile instead of a
     * child start per account (src/app/schedulerStarter.ts says why). A retry lists again. It
     * heartbeats like the Redis guard: a control worker killed mid-call held the reconcile loop (a
     * Redis flush went unrebuilt) until the 5-minute start-to-close timeout.
     */
    async startMissingSchedulers(template: Omit<CarrierSchedulerArgs, 'carrierId'>): Promise<{ enabled: string[]; started: number; failed: number }> {
      const starter = deps.schedulerStarter;
      if (starter === undefined) throw ApplicationFailure.nonRetryable('this control worker has no scheduler starter', 'Misconfigured');
      return whileHeartbeating(async () => {
        const { enabled, toStart } = await listSchedulersToStart();
        const starts = await starter(toStart.map((carrierId) => ({ ...template, carrierId })));
        // A start that failed is tried again at the next reconcile (each minute, or the next account change).
        return { enabled, started: starts.started, failed: starts.failed.length };
      });
    },

    async listEnabledCarriers(): Promise<string[]> {
      const enabled = (await listCarriers(deps.pool, { enabledOnly: true })).map((c) => c.id);
      deps.metrics?.enabledAccounts(enabled);
      return enabled;
    },
  };
}

export type ControlActivities = ReturnType<typeof createControlActivities>;

/** How often a long control activity heartbeats (well inside pollingControl's heartbeat timeout). */
const LIVENESS_HEARTBEAT_MS = 5_000;

/** Runs `work`, heartbeating every few seconds until it settles (no heartbeat outside an activity: unit tests). */
async function whileHeartbeating<T>(work: () => Promise<T>): Promise<T> {
  let context: Context | undefined;
  try {
    context = Context.current();
  } catch {
    context = undefined;
  }
  const timer = context ? setInterval(() => context.heartbeat(), LIVENESS_HEARTBEAT_MS) : undefined;
  try {
    return await work();
  } finally {
    if (timer) clearInterval(timer);
  }
}

/**
 * How long an account whose round found nothing may sleep (0: keep ticking): until the lanes' next
 * due time, and no later than its next priority retry (those wait in PostgreSQL, not in the lanes;
 * the round after the wake-up sweeps them). PostgreSQL unreachable: the longest sleep stands.
 */
async function idleFor(deps: ControlActivityDeps, carrierId: string, idleMaxMs: number, horizonMs: number): Promise<number> {
  let retryInMs: number | null = null;
  try {
    retryInMs = await nextPriorityRetryInMs(deps.pool, carrierId);
  } catch (error) {
    if (!isDatabaseUnreachable(error)) throw error;
  }
  const longestMs = retryInMs === null ? idleMaxMs : Math.min(idleMaxMs, retryInMs);
  if (longestMs < MIN_IDLE_SLEEP_MS) return 0;
  return deps.store.markIdle(carrierId, { longestMs, horizonMs, shortestMs: MIN_IDLE_SLEEP_MS });
}

/** `work`'s value if it settles within `ms`, else undefined (it goes on); a rejection within `ms` is thrown. */
async function within<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
