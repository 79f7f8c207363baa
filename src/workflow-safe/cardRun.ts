/**
 * What a card's run (a cardCheck run, or one card of a cardBatch run) and its activities exchange:
 * the run's input, its plan, the steps' results and the finish. Pure types: workflow-safe.
 */
import type { CheckType, GatewayCheckType } from './checkTypes.js';
import type { TypeFinish } from '../domain/finishPlan.js';

export interface CardCheckInput {
  readonly carrierId: string;
  readonly cardId: string;
  readonly token: string;
  readonly fromPriority: boolean;
  /**
   * When the claim was made (the scheduler's workflow time, i.e. the server's clock): the start
   * lag the adaptive in-flight limit reacts to runs from here, so a scheduler slow to start its
   * children counts as much as a backed-up card task queue.
   */
  readonly claimedAt?: number;
  /** The claim's due horizon: types due up to this long after the run's preparation run in it. */
  readonly dueHorizonMs?: number;
}

/** Where gateway steps run: local activities of the card worker (default) or the gateway task queue. */
export type GatewayStepPlacement = 'local' | 'queue';

export interface ExecutionPlanRun {
  readonly kind: 'run';
  readonly iccid: string;
  readonly gatewayAccount: string;
  /** Types due now, in the configured execution order. */
  readonly types: readonly CheckType[];
  readonly typeGroups: Readonly<Record<string, string>>;
  readonly stepTimeoutMs: number;
  readonly totalTimeoutMs: number;
  readonly leaseMs: number;
  /** Earliest due of the types being run (ms); lateness = start − this. */
  readonly earliestDue: number;
  /** Interval per polled type (ms) from the card's polling configs; finish schedules with them. */
  readonly intervalsMs: Readonly<Partial<Record<CheckType, number>>>;
  readonly priorityItemId?: string;
  /**
   * `sync`: the card worker writes the execution's records itself; `async`: they go to the
   * ingest stream, written in batches by the ingest workers (`polling.ingest.mode`).
   */
  readonly ingestMode: 'sync' | 'async';
  readonly gatewaySteps: GatewayStepPlacement;
  /** How the finish is retried when Redis is away (configuration CARD_FINISH_RETRY_*); defaults when absent. */
  readonly finishRetry?: FinishRetrySettings;
}

/** The lasting retry of a card's finish (src/workflows/finishRetry.ts). */
export interface FinishRetrySettings {
  readonly initialIntervalMs: number;
  readonly maximumIntervalMs: number;
  /** Schedule-to-close of the lasting retry: past it the run's records are written without the finish. */
  readonly timeoutMs: number;
}

export type ExecutionPlan =
  | ExecutionPlanRun
  /** The claim is not ours any more (lease expired, duplicate delivery): end without any call. */
  | { readonly kind: 'lost' }
  /** Another executor holds this token's execution right. */
  | { readonly kind: 'busy' }
  /** The card is gone or no longer polled in PostgreSQL: finish without calling the gateway. */
  | { readonly kind: 'not_polled'; readonly reason: string }
  | ExecutionPlanFinished;

/**
 * This executor's finish of the token already landed: the run is replayed after its worker died
 * between that finish and the completion of the workflow task that carried it (its markers were
 * never recorded). Nothing runs again; the record is written from what the finish stored
 * (docs/design.md, 'cardCheck').
 */
export interface ExecutionPlanFinished {
  readonly kind: 'finished';
  /** The plan as far as the record reads it (types, earliest due, priority item, ingest mode). */
  readonly plan: ExecutionPlanRun;
  readonly startedAt: number;
  readonly results: readonly StepResult[];
  readonly outcome: ExecutionOutcome;
  readonly owned: boolean;
  readonly typeFinishes: readonly TypeFinish[];
}

/**
 * What a successful step saw of the card (a gateway call's answer, or the local package
 * evaluation), as carried in its StepResult; becomes a card_observation row (ObservationRow).
 */
export interface StepObservation {
  readonly collectionId: string;
  readonly observedAt: string;
  readonly payload: Readonly<Record<string, unknown>>;
  /** When the carrier saw this state change (ISO), where its answer says: staleness is measured from it. */
  readonly changedAt?: string;
}

export type StepResult =
  | { readonly type: CheckType; readonly outcome: 'success'; readonly observation?: StepObservation; readonly gatewayMs: number }
  | { readonly type: CheckType; readonly outcome: 'failure'; readonly errorClass: string; readonly message: string; readonly gatewayMs: number }
  /**
   * Waited for the rate limiter past the step's deadline, or the carrier pushed back: not a failure.
   * `store_unavailable`: the local `package` check could not read PostgreSQL (src/activities/card.ts).
   */
  | {
      readonly type: CheckType;
      readonly outcome: 'deferred';
      readonly reason: 'rate_limit_wait' | 'carrier_rate_limited' | 'store_unavailable';
      readonly gatewayMs: number;
    }
  | { readonly type: CheckType; readonly outcome: 'skipped'; readonly reason: 'total_timeout' | 'package_evaluated' };

export interface GatewayStepInput {
  readonly carrierId: string;
  readonly cardId: string;
  /** Claim token and executor id (the run id, held in the exec key): the lease is renewed with them before the call. */
  readonly token: string;
  readonly executorId: string;
  readonly leaseMs: number;
  readonly gatewayAccount: string;
  readonly iccid: string;
  readonly type: GatewayCheckType;
  readonly group: string | undefined;
  /** Absolute deadline (epoch ms) for waiting on the limiter and the call together. */
  readonly deadlineMs: number;
}

export interface FinishInput {
  readonly carrierId: string;
  readonly cardId: string;
  readonly token: string;
  readonly plan: ExecutionPlanRun;
  readonly results: readonly StepResult[];
  readonly startedAt: number;
  readonly fromPriority: boolean;
  readonly workflowId: string;
  readonly runId: string;
}

/** `unprepared`: the plan could not be made (PostgreSQL or Redis away); the claim was given back, nothing ran. */
export type ExecutionOutcome = 'success' | 'partial' | 'failure' | 'deferred' | 'lost' | 'not_polled' | 'lease_lost' | 'unprepared';

export interface FinishResult {
  readonly owned: boolean;
  readonly outcome: ExecutionOutcome;
}
