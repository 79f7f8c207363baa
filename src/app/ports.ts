/**
 * The ports of the application services (src/app/pollingServices.ts implements them): what the
 * activities, the ingest writer and the API call, declared here so that they depend on these
 * interfaces only, and tests can stand in for the services.
 */
import type { ExecutionOutcome, ExecutionPlanRun, StepResult } from '../workflow-safe/cardRun.js';
import type { PollingMode } from '../workflow-safe/pollingMode.js';
import type { RequestCheckInput, RequestCheckResult } from '../workflow-safe/requestCheck.js';

/** Request-check: a durable priority item, then the Redis request (shared by the control activities and the API). */
export interface RequestChecker {
  requestCheck(carrierId: string, request: RequestCheckInput): Promise<RequestCheckResult>;
}

/** Notices a Redis that lost its data and rebuilds it from PostgreSQL. */
export interface RedisGuard {
  /** True when Redis was found empty of our data and has been rebuilt now. */
  ensureIntact(): Promise<boolean>;
}

/** The polling mode switch: to carrier mode rebuilds Redis under a lock first, then the mode is persisted. */
export interface ModeSwitcher {
  switchMode(mode: PollingMode, actor: string, heartbeat: () => void): Promise<{ changed: boolean }>;
}

/** The priority item transitions a card execution causes. */
export interface PriorityTransitions {
  /** Moves the execution's processing item to completed, back to pending, or failed. */
  executionFinished(input: {
    readonly carrierId: string;
    readonly plan: ExecutionPlanRun;
    readonly token: string;
    readonly results: readonly StepResult[];
    readonly outcome: ExecutionOutcome;
  }): Promise<void>;
}

/** Claims the card's active priority item at the start of an execution. */
export interface PriorityClaims {
  /** pending → processing (or take-over of an expired claim); the item id, or none when no item is active. */
  claimForExecution(input: { cardId: string; token: string; leaseMs: number }): Promise<string | undefined>;
  /** A business failure (card gone, not polled): failed at once. */
  failForExecution(input: { itemId: string; token: string; reason: string }): Promise<void>;
}
