/** Ports for the priority item transitions a card execution causes. */
import type { ExecutionOutcome, ExecutionPlanRun, StepResult } from '../workflow-safe/cardRun.js';

export interface PriorityTransitions {
  /** Moves the execution's processing item to completed, back to pending, or failed. */
  executionFinished(input: {
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
