/**
 * Types exchanged between workflows and activities. Pure types and constants: workflow-safe.
 */
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';
import type { CheckType, GatewayCheckType } from './checkTypes.js';
import type { LimitingFactor } from './inflightControl.js';
import type { CardRunShape } from './cardBatches.js';

/** Search attributes that make a card's executions findable in the Web UI. */
export const CARD_ID_ATTRIBUTE = defineSearchAttributeKey('CardId', SearchAttributeType.KEYWORD);
export const CARRIER_ID_ATTRIBUTE = defineSearchAttributeKey('CarrierId', SearchAttributeType.KEYWORD);
export const CHECK_TYPES_ATTRIBUTE = defineSearchAttributeKey('CheckTypes', SearchAttributeType.KEYWORD_LIST);
export const OUTCOME_ATTRIBUTE = defineSearchAttributeKey('Outcome', SearchAttributeType.KEYWORD);
/** `<scheduler workflow id>/<run id>` of the carrierScheduler run whose claim started the card run. */
export const CLAIMED_BY_ATTRIBUTE = defineSearchAttributeKey('ClaimedBy', SearchAttributeType.KEYWORD);
/**
 * Every card a `cardBatch` run carries, given at its start (free: no upsert): the Web UI query
 * `CardIds = "42"` lists the batch runs that checked card 42, as `CardId = "42"` lists its `cardCheck` runs.
 */
export const CARD_IDS_ATTRIBUTE = defineSearchAttributeKey('CardIds', SearchAttributeType.KEYWORD_LIST);

/**
 * Most cards one `cardBatch` run may carry: Temporal refuses a search attribute value over 2 KB
 * (`limit.searchAttributesSizeBytes`), and `CardIds` lists them all; 90 ids of 19 digits (the largest
 * bigint) are 1981 bytes of JSON.
 */
export const MAX_CARD_BATCH_SIZE = 90;

/**
 * The Web UI list query of a card's runs in a run shape (CARD_RUN_SHAPE): its `cardCheck` runs
 * carry `CardId`, the `cardBatch` runs that carried it list it in `CardIds`.
 */
export const cardRunsQuery = (cardId: string, runShape: CardRunShape): string => (runShape === 'batch' ? `CardIds="${cardId}"` : `CardId="${cardId}"`);

/** The `CardIds` search attribute of a batch run carrying `cards`. */
export const cardIdsSearchAttribute = (cards: readonly Pick<ClaimedCard, 'cardId'>[]): SearchAttributePair => ({
  key: CARD_IDS_ATTRIBUTE,
  value: cards.map((card) => card.cardId),
});

/**
 * Workflow ids. `prefix` is empty in production (ids are exactly `card-<id>` etc.); tests sharing
 * one Temporal namespace give each stack its own prefix.
 */
export const pollingControlWorkflowId = (prefix = ''): string => `${prefix}polling-control`;
/** The schedule that starts storageMaintenance hourly, and the id of its runs. */
export const storageMaintenanceScheduleId = (prefix = ''): string => `${prefix}storage-maintenance`;
export const cardWorkflowId = (cardId: string, prefix = ''): string => `${prefix}card-${cardId}`;
export const schedulerWorkflowId = (carrierId: string, prefix = ''): string => `${prefix}carrier-scheduler-${carrierId}`;

/**
 * Failure type of a requestCheck update rejected because the scheduler run is about to
 * continue-as-new: nothing was done, the same update succeeds on the next run (clients retry).
 */
export const SCHEDULER_CONTINUING_AS_NEW = 'scheduler_continuing_as_new';

export type PollingMode = 'carrier' | 'legacy';
export const POLLING_MODES: readonly PollingMode[] = ['carrier', 'legacy'];

export interface TaskQueueNames {
  readonly control: string;
  readonly card: string;
  /** Runs claimed from the priority lane; absent in runs started before it existed (then `card`). */
  readonly cardPriority?: string;
  readonly gateway: string;
  readonly ingest: string;
}

/** Where a deployment's workflows run and how their ids are spelled; passed down from pollingControl. */
export interface Deployment {
  readonly taskQueues: TaskQueueNames;
  readonly workflowIdPrefix: string;
}

export interface ClaimedCard {
  readonly cardId: string;
  readonly token: string;
  readonly fromPriority: boolean;
}

export interface ClaimRoundInput {
  readonly carrierId: string;
  /** Unique per scheduler run and round: `<runId>.<round>`. */
  readonly tokenPrefix: string;
  /** Re-read the account from PostgreSQL instead of the process cache (after configChanged). */
  readonly refreshConfig: boolean;
  /**
   * Time since the previous round. When rounds come late (a busy server delays the tick), the
   * round may plan for that many seconds of budget: the limiter's wait mode still spaces the calls.
   */
  readonly sinceLastRoundMs?: number;
  /** The scheduler's adaptive in-flight limit (below the account's configured one). */
  readonly adaptiveLimit?: number;
  /** The round's instant on the scheduler's workflow clock; client-started runs carry it as `claimedAt`. */
  readonly roundAt?: number;
  /**
   * How far ahead of their due time to claim cards: the engine's expected start lag. The claim
   * bounds it (see `dueHorizonMs` in the result); absent = 0.
   */
  readonly lookaheadMs?: number;
  /**
   * Start this round's runs from the claim activity even in child start mode: the scheduler run is
   * about to continue as new and starts no more children (their completions would arrive at it).
   */
  readonly startRuns?: boolean;
  /**
   * Where the card runs go. Used when the control worker starts them itself with the client
   * (CARD_START_MODE=client, or `startRuns`); otherwise the scheduler starts them as children.
   */
  readonly cardRuns: CardRunPlacement;
}

export interface CardRunPlacement {
  readonly taskQueues: TaskQueueNames;
  readonly workflowIdPrefix: string;
  /** Value of the ClaimedBy search attribute: `<scheduler workflow id>/<run id>`. */
  readonly claimedBy: string;
}

/** Executions that started since the previous round (from the card workers) and their start lag. */
export interface EngineRoundStats {
  readonly starts: number;
  readonly lagSumMs: number;
}

/** The account's orchestration view: what limits it now and what the engine runs for it. */
export interface OrchestrationView {
  readonly limitedBy: LimitingFactor;
  readonly inflightLimit: number;
  readonly configuredInflightLimit: number;
  readonly startsPerSec: number;
  readonly startLagMs: number;
  /** Start lag with no queue (learnt); the part of startLagMs above it is queueing. Null until measured. */
  readonly baseLagMs: number | null;
  /** Executions/s the engine sustained for this account while it was the limit; null until measured. */
  readonly capacityPerSec: number | null;
}

export interface GroupBudgetView {
  readonly name: string;
  readonly qpsConfigured: number;
  readonly qpsEffective: number;
  /** Calls the last round could plan for in this group (rate × round seconds − calls already waiting). */
  readonly remaining: number;
}

export type ClaimRoundResult =
  /** The account is gone or disabled: the scheduler ends. */
  | { readonly kind: 'stop'; readonly reason: 'carrier_missing' | 'carrier_disabled' }
  /** Nothing may be claimed now (legacy mode). */
  | { readonly kind: 'idle'; readonly reason: 'legacy_mode' }
  | {
      readonly kind: 'claimed';
      readonly claimed: readonly ClaimedCard[];
      readonly expired: number;
      readonly running: number;
      readonly lanes: { readonly priority: number; readonly normal: number };
      readonly groups: readonly GroupBudgetView[];
      /** True when the claim activity already started the claimed cards' runs (client start mode). */
      readonly startedByClaim: boolean;
      /** Claimed cards whose run could not be started; their claims are already released. */
      readonly startFailures: number;
      readonly engine: EngineRoundStats;
      readonly limitedBy: LimitingFactor;
      /** The account's configured in-flight limit bounded by the deployment's card capacity. */
      readonly maxInflightLimit: number;
      /** Sum of the account's group budgets (QPS): the weight of its share of the engine. */
      readonly budgetQps: number;
      readonly leaseMs: number;
      /** Cards due up to this long after the claim were claimed; their runs treat them as due. */
      readonly dueHorizonMs: number;
      /** How the scheduler starts the claimed cards' runs when the claim did not (CARD_RUN_SHAPE, CARD_BATCH_SIZE). */
      readonly runShape?: CardRunShape;
      readonly batchSize?: number;
    };

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
  | { readonly kind: 'not_polled'; readonly reason: string };

/**
 * What a successful step saw of the card (a gateway call's answer, or the local package
 * evaluation), as carried in its StepResult; becomes a card_observation row (ObservationRow).
 */
export interface StepObservation {
  readonly collectionId: string;
  readonly observedAt: string;
  readonly payload: Readonly<Record<string, unknown>>;
}

export type StepResult =
  | { readonly type: CheckType; readonly outcome: 'success'; readonly observation?: StepObservation; readonly gatewayMs: number }
  | { readonly type: CheckType; readonly outcome: 'failure'; readonly errorClass: string; readonly message: string; readonly gatewayMs: number }
  /** Waited for the rate limiter past the step's deadline, or the carrier pushed back: not a failure. */
  /** `store_unavailable`: the local `package` check could not read PostgreSQL (src/activities/card.ts). */
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

export interface RequestCheckInput {
  readonly cardId: string;
  readonly types: readonly CheckType[];
  readonly lane?: 'priority' | 'normal';
  readonly cooldownMs?: number;
  readonly confirmDelaysSec?: readonly number[];
  readonly expected?: string;
  /** Who asked and from where, for the priority item and its audit record. */
  readonly actor?: string;
  readonly source?: string;
}

/** Per requested type: asked for, all served within the cooldown, or not polled for this card. */
export type RequestedTypeStatus = 'requested' | 'cooldown' | 'not_polled';

export type RequestCheckResult =
  | { readonly status: 'not_polled'; readonly requested: 0; readonly types?: Readonly<Partial<Record<CheckType, RequestedTypeStatus>>> }
  | { readonly status: 'requested' | 'cooldown'; readonly requested: number; readonly types?: Readonly<Partial<Record<CheckType, RequestedTypeStatus>>> };

/** The last failure of a loop's activity (the loop backs off and keeps going). */
export interface LoopFailure {
  readonly activity: string;
  readonly message: string;
  /** Workflow time of the failure (ISO). */
  readonly at: string;
  /** Failures in a row; 0 once the activity succeeds again. */
  readonly consecutive: number;
}

export interface SchedulerStatus {
  readonly carrierId: string;
  readonly paused: boolean;
  /** `degraded`: the claim (or another activity) keeps failing; the loop retries with backoff. */
  readonly mode: 'claiming' | 'idle' | 'degraded';
  readonly rounds: number;
  readonly running: number;
  readonly claimedLastTick: number;
  readonly expiredLeases: number;
  readonly startFailures: number;
  readonly lanes: { readonly priority: number; readonly normal: number };
  readonly groups: readonly GroupBudgetView[];
  readonly orchestration: OrchestrationView;
  readonly lastFailure?: LoopFailure;
}

export interface ControlStatus {
  readonly mode: PollingMode;
  readonly carriers: readonly string[];
  readonly switching: boolean;
  readonly lastFailure?: LoopFailure;
}

/**
 * How long a card whose run could not start waits before it is claimed again. The usual cause is
 * an earlier run of the card still running (its records wait for PostgreSQL): claiming it again
 * next round would only fail again, every round, until that run ends.
 */
export const FAILED_START_RETRY_MS = 15_000;

/** The task queue of a claimed card's run: the priority lane's own queue skips the normal backlog. */
export const cardTaskQueue = (queues: TaskQueueNames, fromPriority: boolean): string => (fromPriority ? (queues.cardPriority ?? queues.card) : queues.card);
