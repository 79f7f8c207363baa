/**
 * Activities of the `polling-card` task queue: the Redis bookkeeping of one card execution
 * (execution right, lease renewal, finish, release) and the plan of what to run.
 */
import type { Pool } from '../db/pool.js';
import { findCards } from '../db/cards.js';
import type { CarrierQueueStore } from '../redis/carrierQueueStore.js';
import type { DueState } from '../redis/dueState.js';
import { CHECK_TYPES, type CheckType } from '../common/checkTypes.js';
import type { ExecutionPlan, FinishInput, FinishResult, GatewayStepPlacement, StepResult } from '../common/orchestration.js';
import type { Intervals } from '../domain/pollingConfig.js';
import { decodeFinishRecord, encodeFinishRecord, planFinish, type TypeFinish } from './finishPlan.js';
import type { ReferenceData } from './referenceData.js';
import type { ActivityMetrics } from './metrics.js';
import type { PackageEvaluator } from './packageEvaluation.js';
import type { PriorityClaims } from './priorityTransitions.js';

/** Order in which due types run within one execution (DESIGN §6: configured order). */
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
}

export interface PrepareInput {
  readonly carrierId: string;
  readonly cardId: string;
  readonly token: string;
  /** The execution's identity (its run id): only this executor may renew and finish. */
  readonly execValue: string;
  readonly fromPriority: boolean;
  /**
   * Time from the run's creation to its first workflow task (server times): how far the engine
   * is behind. Counted for the account's adaptive in-flight limit.
   */
  readonly startLagMs?: number;
}

export interface CardFinishInput extends FinishInput {
  /**
   * The lease was lost before the remaining steps: what the completed ones learned is written as
   * a stale finish (no due moved later, no claim released, no lane touched: DESIGN §4.4).
   */
  readonly leaseLost?: boolean;
}

export interface CardFinishResult extends FinishResult {
  readonly failCounts: readonly TypeFinish[];
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

function dueTypes(state: DueState | null, intervals: Intervals, now: number): { types: CheckType[]; earliest: number } {
  const types: CheckType[] = [];
  let earliest = Number.POSITIVE_INFINITY;
  for (const type of EXECUTION_ORDER) {
    const due = state?.types[type].due ?? null;
    if (due === null || due > now || intervals[type] === undefined) continue;
    types.push(type);
    earliest = Math.min(earliest, due);
  }
  return { types, earliest: Number.isFinite(earliest) ? earliest : now };
}

export function createCardActivities(deps: CardActivityDeps) {
  const random = deps.random ?? Math.random;
  return {
    async prepareExecution(input: PrepareInput): Promise<ExecutionPlan> {
      const carrier = await deps.reference.carrier(input.carrierId);
      const leaseMs = carrier?.leaseMs ?? 60_000;
      if (input.startLagMs !== undefined) await deps.store.recordStart(input.carrierId, input.startLagMs);
      const right = await deps.store.acquireExec(input.carrierId, input.cardId, input.token, input.execValue, leaseMs);
      if (right === 'lost') return { kind: 'lost' };
      if (right === 'busy') return { kind: 'busy' };
      if (!carrier) return { kind: 'not_polled', reason: 'carrier account no longer exists' };
      const [card] = await findCards(deps.pool, [input.cardId]);
      if (!card) return { kind: 'not_polled', reason: 'card no longer exists' };
      if (card.carrierId !== input.carrierId) return { kind: 'not_polled', reason: `card moved to carrier ${card.carrierId}` };
      if (!card.polled) return { kind: 'not_polled', reason: 'polling disabled for the card or its device' };
      const intervals = (await deps.reference.intervals()).resolve(card);
      const now = await deps.store.clockNow();
      const state = await deps.store.readDue(input.carrierId, input.cardId);
      const { types, earliest } = dueTypes(state, intervals, now);
      deps.metrics?.lateness(input.carrierId, now - earliest);
      // A pending request (priority lane, or a request stamp on a type) has a durable item to move.
      const requested = input.fromPriority || (state !== null && CHECK_TYPES.some((type) => state.types[type].req !== null));
      const priorityItemId = requested ? await deps.priority.claimForExecution({ cardId: input.cardId, token: input.token, leaseMs }) : undefined;
      if (priorityItemId !== undefined && input.fromPriority) deps.metrics?.priorityLatency(input.carrierId, now - earliest);
      return {
        kind: 'run',
        iccid: card.iccid,
        gatewayAccount: carrier.gatewayAccount,
        types,
        typeGroups: Object.fromEntries(Object.entries(carrier.typeGroups).filter(([type]) => type !== 'realname' || carrier.realnameControl)), // realname takes a limiter slot only under real-name control (DESIGN §1), as the claim assumes
        stepTimeoutMs: carrier.stepTimeoutMs,
        totalTimeoutMs: carrier.totalTimeoutMs,
        leaseMs,
        earliestDue: earliest,
        intervalsMs: intervalsMs(intervals),
        ingestMode: await deps.reference.ingestMode(),
        gatewaySteps: deps.gatewaySteps ?? 'local',
        ...(priorityItemId === undefined ? {} : { priorityItemId }),
      };
    },

    async renewLease(input: { carrierId: string; cardId: string; token: string; execValue: string; leaseMs: number }): Promise<boolean> {
      return deps.store.renew(input.carrierId, input.cardId, input.token, input.execValue, input.leaseMs);
    },

    async releaseClaim(input: { carrierId: string; cardId: string; token: string }): Promise<boolean> {
      return deps.store.release(input.carrierId, input.cardId, input.token);
    },

    /** The card left polling in PostgreSQL: take it out of Redis too, and give the claim back. */
    async finishNotPolled(input: { carrierId: string; cardId: string; token: string; reason: string; fromPriority: boolean }): Promise<void> {
      const [card] = await findCards(deps.pool, [input.cardId]);
      // Only drop it from this account's lanes when PostgreSQL agrees it is not polled here.
      if (!card || !card.polled || card.carrierId !== input.carrierId) await deps.store.remove(input.carrierId, input.cardId);
      if (card) {
        const carrier = await deps.reference.carrier(input.carrierId);
        const itemId = await deps.priority.claimForExecution({ cardId: input.cardId, token: input.token, leaseMs: carrier?.leaseMs ?? 60_000 });
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
      if (!leaseLost && (input.plan.types.includes('package') || carddataOk)) {
        evaluated = await deps.packages.evaluate(input.cardId, results);
        // Only a due `package` moves its own schedule; a carddata-triggered evaluation is recorded only.
        if (input.plan.types.includes('package')) results.push(evaluated);
      }
      // The intervals resolved when the execution started: no second card read on the hot path.
      const plan = planFinish({ state, results, intervalsMs: input.plan.intervalsMs, backoffBaseMs: carrier?.backoffBaseMs ?? 30_000, now, random });
      const record = encodeFinishRecord({ outcome: plan.outcome, types: plan.types, ...(evaluated ? { evaluated } : {}) });
      const finished = await deps.store.finishWithRecord({ carrierId: input.carrierId, cardId: input.cardId, token: input.token, now, set: plan.set, del: plan.del, record, leaseLost });
      const recorded = (extra: StepResult | undefined): StepResult[] => (extra ? [...input.results, extra] : [...input.results]);
      if (finished.replayed !== null) {
        // This token's finish already landed (an earlier attempt): its result, nothing counted twice.
        const first = decodeFinishRecord(finished.replayed);
        return { owned: finished.owned, outcome: first.outcome, failCounts: first.types, results: recorded(first.evaluated) };
      }
      for (const type of plan.types) deps.metrics?.check(input.carrierId, type.type, type.outcome);
      return { owned: finished.owned, outcome: plan.outcome, failCounts: plan.types, results: recorded(evaluated) };
    },
  };
}

export type CardActivities = ReturnType<typeof createCardActivities>;
