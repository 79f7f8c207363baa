/**
 * Activities of the `polling-card` task queue: the Redis bookkeeping of one card execution
 * (execution right, lease renewal, finish, release) and the plan of what to run.
 */
import { ApplicationFailure } from '@temporalio/activity';
import type { Pool } from '../db/pool.js';
import { sameTurnBatcher } from '../runtime/sameTurnBatcher.js';
import { findCards } from '../db/cards.js';
import { describeConnectionError } from '../runtime/connectionErrors.js';
import { defaultLogger } from '../runtime/logger.js';
import type { ScopedCard } from '../domain/card.js';
import { DEFAULT_BACKOFF_BASE_MS, DEFAULT_LEASE_MS, type Carrier } from '../domain/carrier.js';
import { DueField } from '../redis/dueFields.js';
import { BoundedCache } from '../runtime/boundedCache.js';
import { isDatabaseUnreachable } from '../runtime/databaseErrors.js';
import type { CarrierQueueStore } from '../redis/carrierQueueStore.js';
import { CHECK_TYPES, type CheckType } from '../workflow-safe/checkTypes.js';
import type {
  ExecutionPlan,
  ExecutionPlanFinished,
  ExecutionPlanRun,
  FinishInput,
  FinishResult,
  FinishRetrySettings,
  GatewayStepPlacement,
  StepResult,
} from '../workflow-safe/cardRun.js';
import { DEFAULT_FINISH_RETRY } from '../workflows/finishRetry.js';
import type { Intervals } from '../domain/pollingConfig.js';
import { dueTypes } from '../workflow-safe/schedule.js';
import { decodeFinishRecord, encodeFinishRecord, planFinish, type FinishedRun, type TypeFinish } from '../domain/finishPlan.js';
import type { ReferenceData } from '../runtime/referenceData.js';
import type { ActivityMetrics } from '../runtime/metrics.js';
import type { PackageEvaluator } from './packageEvaluation.js';
import type { PriorityClaims } from '../app/ports.js';

/**
 * Order in which due types run within one execution: fixed, not configured (docs/design.md,
 * 'cardCheck' and 'Differences from the product spec').
 */
export const EXECUTION_ORDER: readonly CheckType[] = CHECK_TYPES;

export interface CardActivityDeps {
  readonly pool: Pool;
  readonly store: CarrierQueueStore;
  readonly reference: ReferenceData;
  readonly packages: PackageEvaluator;
  readonly priority: PriorityClaims;
  readonly metrics?: ActivityMetrics;
  readonly random?: () => number;
  /** Where the card's gateway steps run (configuration GATEWAY_STEPS); local by default. */
  readonly gatewaySteps?: GatewayStepPlacement;
  /** The card rows this process remembers for a PostgreSQL outage (see {@link RememberedCard}). */
  readonly rememberedCards?: BoundedCache<string, RememberedCard>;
  /** Where the outage's two lines go (default: {@link defaultLogger} at `warn`; workers pass their process logger). */
  readonly log?: (line: string) => void;
  /** How runs retry their finish while Redis is away (handed to them in the plan). */
  readonly finishRetry?: FinishRetrySettings;
}

/**
 * What an execution needs of its card row, remembered from the last successful read, for when
 * PostgreSQL cannot be reached (docs/design.md, 'PostgreSQL and records': polling continues through
 * a database outage in async ingest mode).
 *
 * Why an in-process cache and not a copy in Redis (e.g. the iccid in the due hash): the due hash
 * belongs to the Lua scripts, whose exact state the model test checks against its model (I1: a
 * hash exactly where the card has a lane), so a field written from outside the scripts or a new
 * upsert argument would change all of them for a fallback used only during an outage; and
 * writing it would cost every lifecycle event and every rebuild a Redis write. The cost of this
 * choice: a card this process has not prepared since it started is not run during an outage
 * (released for {@link UNREACHABLE_RETRY_MS}, run once PostgreSQL answers). Polled cards come
 * round every interval, so a running worker knows the cards it serves; the bound keeps memory flat.
 *
 * A remembered row is used only while PostgreSQL is unreachable. The first preparation after it
 * answers again reads the row fresh, so a card removed from polling (or moved) meanwhile is then
 * found not polled and taken out of Redis by `finishNotPolled`, as at any other time.
 */
export type RememberedCard = Pick<ScopedCard, 'id' | 'iccid' | 'carrierId' | 'status' | 'polled'>;

/** ~100 bytes each: 200 000 cards in a few tens of MB per card worker. */
const REMEMBERED_CARDS = 200_000;

/**
 * A claimed card that cannot be prepared while PostgreSQL is unreachable waits this long before it
 * is claimed again: not every round, and soon after the database is back.
 */
export const UNREACHABLE_RETRY_MS = 10_000;

/**
 * A due `package` that cannot be evaluated (PostgreSQL unreachable) is deferred this long (at most
 * its interval): the card is not claimed again every second only to fail the same read.
 */
export const PACKAGE_DEFER_MS = 60_000;

export interface PrepareInput {
  readonly carrierId: string;
  readonly cardId: string;
  readonly token: string;
  /** The execution's identity (its run id): only this executor may renew and finish. */
  readonly executorId: string;
  readonly fromPriority: boolean;
  /**
   * Time from the claim (or the run's creation) to its first workflow task (server times): what a
   * claim waits to run. The adaptive in-flight limit's lease guard and due horizon follow it.
   */
  readonly startLagMs?: number;
  /**
   * The wait in the engine's queue (server times), the adaptive limit's congestion signal: the run's
   * creation to its first workflow task, or for a scheduler's child its start lag (see
   * src/workflows/cardExecution.ts). Absent from runs of older code.
   */
  readonly queueLagMs?: number;
  /** The claim's due horizon: types due up to this long from now count as due (claimed ahead). */
  readonly dueHorizonMs?: number;
}

export interface CardFinishInput extends FinishInput {
  /**
   * The lease was lost before the remaining steps: what the completed ones learned is written as
   * a stale finish (no due moved later, no claim released, no lane touched: docs/design.md, 'Lua
   * scripts', finish).
   */
  readonly leaseLost?: boolean;
}

export interface CardFinishResult extends FinishResult {
  readonly typeFinishes: readonly TypeFinish[];
  /** The step results plus the local package evaluation, for the durable record. */
  readonly results: readonly StepResult[];
}

function intervalsMs(intervals: Intervals): Partial<Record<CheckType, number>> {
  const result: Partial<Record<CheckType, number>> = {};
  for (const type of CHECK_TYPES) {
    const seconds = intervals[type];
    if (seconds !== undefined) result[type] = seconds * 1000;
  }
  return result;
}

export function createCardActivities(deps: CardActivityDeps) {
  const random = deps.random ?? Math.random;
  const remembered = deps.rememberedCards ?? new BoundedCache<string, RememberedCard>(REMEMBERED_CARDS);
  const log = deps.log ?? ((line: string) => defaultLogger().warn(line));
  const custom = deps.finishRetry;
  const finishRetry =
    custom &&
    (custom.initialIntervalMs !== DEFAULT_FINISH_RETRY.initialIntervalMs ||
      custom.maximumIntervalMs !== DEFAULT_FINISH_RETRY.maximumIntervalMs ||
      custom.timeoutMs !== DEFAULT_FINISH_RETRY.timeoutMs)
      ? custom
      : undefined;
  // One line when executions start running from remembered rows, one when PostgreSQL answers again.
  let fallingBack = false;
  // The card rows read in one turn (a batch's preparations, concurrent runs) in one statement.
  const cardRow = sameTurnBatcher(async (ids: readonly string[]): Promise<(ScopedCard | undefined)[]> => {
    const rows = new Map((await findCards(deps.pool, [...new Set(ids)])).map((card) => [card.id, card]));
    return ids.map((id) => rows.get(id));
  });

  /** Gives the claim back for a while and ends the preparation (the run's outcome: `unprepared`). */
  async function notNow(input: PrepareInput, why: string, cause: unknown): Promise<never> {
    await deps.store.release(input.carrierId, input.cardId, input.token, undefined, UNREACHABLE_RETRY_MS);
    throw ApplicationFailure.create({
      type: 'database_unreachable',
      message: `card ${input.cardId} not prepared: ${why}`,
      nonRetryable: true,
      cause: cause instanceof Error ? cause : undefined,
    });
  }

  /**
   * The card row from PostgreSQL; when PostgreSQL is unreachable and the records go to the async
   * ingest (so the execution can end without it), the row remembered from the last read. In sync
   * mode the error is thrown as before: the record could not be written anyway.
   */
  async function readCard(input: PrepareInput): Promise<{ card: RememberedCard | undefined; remembered: boolean }> {
    let card: ScopedCard | undefined;
    try {
      card = await cardRow(input.cardId);
    } catch (error) {
      if (!isDatabaseUnreachable(error)) throw error;
      const mode = await deps.reference.ingestMode().catch(() => undefined);
      if (mode !== 'async') throw error;
      const row = remembered.get(input.cardId);
      // Only a row that says "polled here" is run; anything else waits for PostgreSQL to decide.
      if (!row || !row.polled || row.carrierId !== input.carrierId)
        return notNow(input, 'PostgreSQL unreachable and no remembered row of the card polled in this account', error);
      if (!fallingBack)
        log(
          `card executions: PostgreSQL unreachable (${describeConnectionError(error)}); running claimed cards from their ` +
            `remembered rows, records go to the async ingest`,
        );
      fallingBack = true;
      return { card: row, remembered: true };
    }
    if (fallingBack) log('card executions: card rows read from PostgreSQL again');
    fallingBack = false;
    if (card) remembered.set(card.id, { id: card.id, iccid: card.iccid, carrierId: card.carrierId, status: card.status, polled: card.polled });
    else remembered.delete(input.cardId);
    return { card, remembered: false };
  }

  /**
   * The claim is gone because this executor's own finish landed: the run is being replayed after
   * its worker died before the workflow task carrying that finish completed (issue 46). The record
   * is written from what the run stored beside its finish (CarrierQueueStore.finishWithRun), so
   * what the check learned is not lost.
   */
  async function finishedBefore(input: PrepareInput, carrier: Carrier | null): Promise<ExecutionPlanFinished | null> {
    const stored = await deps.store.finishedRun(input.carrierId, input.cardId, input.token);
    if (stored === null) return null;
    const first = decodeFinishRecord(stored.run);
    const run = first.run;
    if (run === undefined || (input.executorId !== run.runId && input.executorId !== `${run.runId}/${input.cardId}`)) return null;
    // Only what the record reads matters here; the rest is the account's as it is now.
    const plan: ExecutionPlanRun = {
      kind: 'run',
      iccid: '',
      gatewayAccount: carrier?.gatewayAccount ?? '',
      types: run.types,
      typeGroups: {},
      stepTimeoutMs: carrier?.stepTimeoutMs ?? 0,
      totalTimeoutMs: carrier?.totalTimeoutMs ?? 0,
      leaseMs: carrier?.leaseMs ?? DEFAULT_LEASE_MS,
      earliestDue: run.earliestDue,
      intervalsMs: {},
      ingestMode: await deps.reference.ingestMode(),
      gatewaySteps: deps.gatewaySteps ?? 'local',
      ...(run.priorityItemId === undefined ? {} : { priorityItemId: run.priorityItemId }),
    };
    const results = first.evaluated ? [...run.results, first.evaluated] : [...run.results];
    // The finish's reply is known while `fin` is still this token's; once a newer claim's finish
    // replaced it (the batch shape has no one-run-per-card rule), `owned` records "not known".
    return { kind: 'finished', plan, startedAt: run.startedAt, results, outcome: first.outcome, owned: stored.owned === true, typeFinishes: first.types };
  }

  return {
    async prepareExecution(input: PrepareInput): Promise<ExecutionPlan> {
      const carrier = await deps.reference.carrier(input.carrierId);
      const leaseMs = carrier?.leaseMs ?? DEFAULT_LEASE_MS;
      if (input.startLagMs !== undefined) {
        deps.metrics?.executionStart(input.carrierId, input.startLagMs);
        await deps.store.recordStart(input.carrierId, input.startLagMs, input.queueLagMs);
      }
      const right = await deps.store.acquireExec(input.carrierId, input.cardId, input.token, input.executorId, leaseMs);
      if (right === 'lost') return (await finishedBefore(input, carrier)) ?? { kind: 'lost' };
      if (right === 'busy') return { kind: 'busy' };
      // The lease runs from the execution's start, not the claim's: a card of a batch without a
      // gateway step of its own (package only) renews nowhere else, and waits at the batch's gate
      // for the slowest card's steps — at most the account's total timeout, which never exceeds the
      // lease — so a run that started late lost its lease meanwhile and was claimed again (issue 46).
      if (!(await deps.store.renew(input.carrierId, input.cardId, input.token, input.executorId, leaseMs))) return { kind: 'lost' };
      if (!carrier) return { kind: 'not_polled', reason: 'carrier account no longer exists' };
      const { card, remembered: fromMemory } = await readCard(input);
      if (!card) return { kind: 'not_polled', reason: 'card no longer exists' };
      if (card.carrierId !== input.carrierId) return { kind: 'not_polled', reason: `card moved to carrier ${card.carrierId}` };
      if (!card.polled) return { kind: 'not_polled', reason: 'polling disabled for the card or its device' };
      let intervals = (await deps.reference.intervals()).resolve(card);
      const now = await deps.store.clockNow();
      const state = await deps.store.readDue(input.carrierId, input.cardId);
      // The finish drops the dues these intervals do not poll (planFinish): when there are some,
      // decide on configs read now, not on a copy cached up to a few seconds before a config
      // change whose rebuild may just have written that due.
      if (state !== null && CHECK_TYPES.some((type) => state.types[type].due !== null && intervals[type] === undefined))
        intervals = (await deps.reference.intervals(true)).resolve(card);
      // Claimed ahead of due by up to the horizon: those types are this run's too.
      const { types, earliest } = dueTypes(state, intervals, now + (input.dueHorizonMs ?? 0), EXECUTION_ORDER);
      // A run started ahead of its due time is on time, not negatively late.
      deps.metrics?.lateness(input.carrierId, Math.max(0, now - earliest));
      // A pending request (priority lane, or a request stamp on a type) has a durable item to move;
      // not while a requested type is deferred (not run now): the run that serves it takes the item.
      const deferredRequest = state !== null && state.deferred.some((type) => state.types[type].req !== null);
      const requested = !deferredRequest && (input.fromPriority || (state !== null && CHECK_TYPES.some((type) => state.types[type].req !== null)));
      // Its durable priority item cannot be claimed without PostgreSQL, and serving the request in
      // Redis alone would leave the item pending for ever: the card waits for the database instead.
      if (fromMemory && requested) return notNow(input, 'a pending request-check needs its priority item from PostgreSQL', undefined);
      const priorityItemId = requested ? await deps.priority.claimForExecution({ cardId: input.cardId, token: input.token, leaseMs }) : undefined;
      if (priorityItemId !== undefined && input.fromPriority) deps.metrics?.priorityLatency(input.carrierId, now - earliest);
      return {
        kind: 'run',
        iccid: card.iccid,
        gatewayAccount: carrier.gatewayAccount,
        types,
        // realname takes a limiter slot only under real-name control, as the claim assumes
        // (docs/design.md, 'The job')
        typeGroups: Object.fromEntries(Object.entries(carrier.typeGroups).filter(([type]) => type !== 'realname' || carrier.realnameControl)),
        stepTimeoutMs: carrier.stepTimeoutMs,
        totalTimeoutMs: carrier.totalTimeoutMs,
        leaseMs,
        earliestDue: earliest,
        intervalsMs: intervalsMs(intervals),
        ingestMode: await deps.reference.ingestMode(),
        gatewaySteps: deps.gatewaySteps ?? 'local',
        // Only settings other than the defaults travel (every run's plan is in its history).
        ...(finishRetry ? { finishRetry } : {}),
        ...(priorityItemId === undefined ? {} : { priorityItemId }),
      };
    },

    async releaseClaim(input: { carrierId: string; cardId: string; token: string }): Promise<boolean> {
      return deps.store.release(input.carrierId, input.cardId, input.token);
    },

    /** The card left polling in PostgreSQL: take it out of Redis too, and give the claim back. */
    async finishNotPolled(input: { carrierId: string; cardId: string; token: string; reason: string; fromPriority: boolean }): Promise<void> {
      let card: ScopedCard | undefined;
      try {
        card = await cardRow(input.cardId);
      } catch (error) {
        // PostgreSQL unreachable (a stale "account gone" answered the preparation): nothing is
        // removed on a guess. The claim is given back for a while; the first run after the
        // outage decides with PostgreSQL, as here (docs/design.md, 'PostgreSQL and records').
        if (!isDatabaseUnreachable(error)) throw error;
        await deps.store.release(input.carrierId, input.cardId, input.token, undefined, UNREACHABLE_RETRY_MS);
        return;
      }
      // Only drop it from this account's lanes when PostgreSQL agrees it is not polled here.
      if (!card || !card.polled || card.carrierId !== input.carrierId) await deps.store.remove(input.carrierId, input.cardId);
      if (card) {
        const carrier = await deps.reference.carrier(input.carrierId);
        const itemId = await deps.priority.claimForExecution({ cardId: input.cardId, token: input.token, leaseMs: carrier?.leaseMs ?? DEFAULT_LEASE_MS });
        if (itemId !== undefined) await deps.priority.failForExecution({ itemId, token: input.token, reason: input.reason });
      }
      await deps.store.release(input.carrierId, input.cardId, input.token);
    },

    /**
     * Idempotent (it runs as a retried local activity): the result goes to Redis with the finish,
     * and a retry after that finish landed gets it back instead of recomputing it from the hash
     * the first attempt already updated.
     */
    async finishExecution(input: CardFinishInput): Promise<CardFinishResult> {
      const now = await deps.store.clockNow();
      const leaseLost = input.leaseLost === true;
      const state = await deps.store.readDue(input.carrierId, input.cardId);
      const carrier = await deps.reference.carrier(input.carrierId);
      const results: StepResult[] = [...input.results];
      // `package` is local: evaluated once per execution, whether due itself or triggered by carddata.
      // An execution stopped by a lost lease did not get to it.
      const carddataOk = results.some((r) => r.type === 'carddata' && r.outcome === 'success');
      let evaluated: StepResult | undefined;
      let packageDeferred = false;
      if (!leaseLost && (input.plan.types.includes('package') || carddataOk)) {
        try {
          evaluated = await deps.packages.evaluate(input.cardId, results);
        } catch (error) {
          // PostgreSQL unreachable (docs/design.md, 'PostgreSQL and records'): the execution is not
          // held up by the local check.
          // A due `package` is deferred (no failure counted, evaluated at a later execution once
          // the database answers); a carddata-triggered one is skipped (it is recorded only).
          // The deferral is the execution's package result: recorded, and replayed by a retried finish.
          if (!isDatabaseUnreachable(error)) throw error;
          packageDeferred = input.plan.types.includes('package');
          if (packageDeferred) evaluated = { type: 'package', outcome: 'deferred', reason: 'store_unavailable', gatewayMs: 0 };
        }
        // Only a due `package` moves its own schedule; a carddata-triggered evaluation is recorded only.
        if (evaluated && input.plan.types.includes('package')) results.push(evaluated);
      }
      // The intervals resolved when the execution started: no second card read on the hot path.
      const planned = planFinish({
        state,
        results,
        intervalsMs: input.plan.intervalsMs,
        backoffBaseMs: carrier?.backoffBaseMs ?? DEFAULT_BACKOFF_BASE_MS,
        now,
        random,
      });
      const packageIntervalMs = input.plan.intervalsMs.package;
      let plan = planned;
      if (packageDeferred && packageIntervalMs !== undefined) {
        // A plain deferral is due again in 1–2 s: far too soon for a database outage.
        const delay = Math.min(packageIntervalMs, PACKAGE_DEFER_MS);
        const due = now + Math.round(delay / 2 + random() * (delay / 2));
        plan = {
          ...planned,
          set: { ...planned.set, [DueField.due('package')]: due },
          types: planned.types.map((t) => (t.type === 'package' ? { ...t, nextDue: due } : t)),
        };
      }
      const run: FinishedRun = {
        runId: input.runId,
        startedAt: input.startedAt,
        types: input.plan.types,
        earliestDue: input.plan.earliestDue,
        ...(input.plan.priorityItemId === undefined ? {} : { priorityItemId: input.plan.priorityItemId }),
        results: input.results,
      };
      const finishRecord = { outcome: plan.outcome, types: plan.types, ...(evaluated ? { evaluated } : {}) };
      // The results travel beside the finish under the token's own key (a replay's record reads
      // them), not in `fin`, which every finish replaces and keeps for an hour.
      const finished = await deps.store.finishWithRun(
        {
          carrierId: input.carrierId,
          cardId: input.cardId,
          token: input.token,
          now,
          set: plan.set,
          del: plan.del,
          record: encodeFinishRecord(finishRecord),
          leaseLost,
        },
        encodeFinishRecord({ ...finishRecord, run }),
      );
      const recorded = (extra: StepResult | undefined): StepResult[] => (extra ? [...input.results, extra] : [...input.results]);
      if (finished.replayed !== null) {
        // This token's finish already landed (an earlier attempt): its result, nothing counted twice.
        const first = decodeFinishRecord(finished.replayed);
        return { owned: finished.owned, outcome: first.outcome, typeFinishes: first.types, results: recorded(first.evaluated) };
      }
      for (const type of plan.types) deps.metrics?.check(input.carrierId, type.type, type.outcome);
      return { owned: finished.owned, outcome: plan.outcome, typeFinishes: plan.types, results: recorded(evaluated) };
    },
  };
}

export type CardActivities = ReturnType<typeof createCardActivities>;
