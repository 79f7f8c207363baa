/**
 * What the scheduler's claim round and its activity exchange: the cards claimed, the account's
 * budget and limits, where the claimed cards' runs go. Pure types and constants: workflow-safe.
 */
import type { LimitingFactor } from './inflightControl.js';
import type { CardRunShape } from './cardBatches.js';
import type { TaskQueueNames } from './taskQueues.js';

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
  /**
   * The account's smoothed execution rate and whether the engine held its last round back: published
   * beside the other accounts' to learn its fair rate of a saturated engine (src/workflow-safe/engineShare.ts).
   * Absent before the scheduler's first round.
   */
  readonly engineShare?: { readonly startsPerSec: number; readonly wanting: boolean };
  /**
   * Claims of children this scheduler run asked the server to start and that have not started
   * yet: the round holds them for another lease before it claims (a late start would otherwise
   * find its claim expired and taken by a later round). Absent: none.
   */
  readonly holdClaims?: readonly ClaimedCard[];
}

export interface CardRunPlacement {
  readonly taskQueues: TaskQueueNames;
  readonly workflowIdPrefix: string;
  /** Value of the ClaimedBy search attribute: `<scheduler workflow id>/<run id>`. */
  readonly claimedBy: string;
}

/** Executions that started since the previous round (from the card workers), their start lag and queue lag. */
export interface EngineRoundStats {
  readonly starts: number;
  readonly lagSumMs: number;
  /** Absent from rounds recorded by older code (replay): the start lag stands in. */
  readonly queueStarts?: number;
  readonly queueLagSumMs?: number;
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
  /** Nothing was claimed: this deployment claims in a loop activity (SCHEDULER_LOOP=activity), which the scheduler starts now. */
  | { readonly kind: 'handOver' }
  | {
      readonly kind: 'claimed';
      readonly claimed: readonly ClaimedCard[];
      readonly expired: number;
      readonly running: number;
      readonly lanes: { readonly priority: number; readonly normal: number };
      readonly groups: readonly GroupBudgetView[];
      /** True when the claim activity starts the claimed cards' runs (client start mode): started, or still starting (`startsPending`). */
      readonly startedByClaim: boolean;
      /**
       * True when the claim activity started the runs of the cards it took from the priority lane
       * (child start mode, card shape): the scheduler starts only the others as children.
       */
      readonly priorityStartedByClaim?: boolean;
      /** Claimed cards whose run could not be started; their claims are already released. */
      readonly startFailures: number;
      /**
       * The round returned with some of its run starts still under way (they finish in the
       * background, releasing the claims of those that fail): `startFailures` counts only the
       * failures known by then; the account's next round on the same worker process counts the rest.
       */
      readonly startsPending?: boolean;
      /** Of the round's `holdClaims`, those still owned and not yet taken up by their run (held for another lease). */
      readonly claimsHeld?: number;
      readonly engine: EngineRoundStats;
      readonly limitedBy: LimitingFactor;
      /** The account's configured in-flight limit bounded by the deployment's card capacity. */
      readonly maxInflightLimit: number;
      /** Sum of the account's group budgets (QPS): the weight of its share of the engine. */
      readonly budgetQps: number;
      readonly leaseMs: number;
      /** Cards due up to this long after the claim were claimed; their runs treat them as due. */
      readonly dueHorizonMs: number;
      /** The account's fair execution rate of a saturated engine (absent: the engine holds nobody back). */
      readonly fairRatePerSec?: number;
      /** How the scheduler starts the claimed cards' runs when the claim did not (CARD_RUN_SHAPE, CARD_BATCH_SIZE). */
      readonly runShape?: CardRunShape;
      readonly batchSize?: number;
      /**
       * Nothing was due or in flight: the scheduler may sleep this long (until the lanes' next due
       * time, at most SCHEDULER_IDLE_MAX_MS) unless woken. Absent: it keeps its tick.
       */
      readonly idleMs?: number;
    };

/**
 * How long a card whose run could not start waits before it is claimed again. The usual cause is
 * an earlier run of the card still running (its records wait for PostgreSQL): claiming it again
 * next round would only fail again, every round, until that run ends.
 */
export const FAILED_START_RETRY_MS = 15_000;

/**
 * A card claimed while its previous run is still open — that run has finished its claim and is
 * writing its record, and the card came due again within the claim's due horizon — usually only
 * needs a moment: its claim is given back due this soon, then twice as late after each refusal in
 * a row, up to FAILED_START_RETRY_MS (a run open for minutes, its records waiting for PostgreSQL,
 * costs one refused start per 15 s, as before). Given back, not held: a claim held back for the
 * previous run's end would live in the scheduler's memory and expire when its worker dies.
 */
export const STILL_RUNNING_FIRST_RETRY_MS = 500;

/** A claim to give back, due again after `retryAfterMs` (absent: FAILED_START_RETRY_MS). */
export interface ClaimRelease extends ClaimedCard {
  readonly retryAfterMs?: number;
}
