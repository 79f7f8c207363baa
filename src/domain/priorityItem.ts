/** Durable request-check items (one active per card; see db/priorityItems.ts). */
import type { CheckType } from '../workflow-safe/checkTypes.js';

export const PRIORITY_STATUSES = ['pending', 'processing', 'completed', 'failed'] as const;
export type PriorityStatus = (typeof PRIORITY_STATUSES)[number];
export type Lane = 'priority' | 'normal';

/** Default attempts before a retryable failure becomes final. */
export const DEFAULT_ATTEMPT_LIMIT = 3;

export interface PriorityItem {
  readonly id: string;
  readonly cardId: string;
  readonly status: PriorityStatus;
  readonly types: readonly CheckType[];
  readonly lane: Lane;
  readonly cooldownMs: number;
  readonly confirmDelaysSec: readonly number[];
  readonly expected: string | null;
  readonly triggerCount: number;
  readonly firstActor: string;
  readonly firstSource: string;
  readonly lastActor: string;
  readonly lastSource: string;
  readonly lastTriggeredAt: Date;
  readonly attemptCount: number;
  readonly attemptLimit: number;
  readonly claimToken: string | null;
  readonly claimedAt: Date | null;
  readonly startedAt: Date | null;
  readonly finishedAt: Date | null;
  readonly nextRunAt: Date | null;
  readonly result: 'success' | 'failed' | null;
  readonly failureReason: string | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

export interface PriorityRequest {
  readonly cardId: string;
  readonly types: readonly CheckType[];
  /** Who asked (user id, service name) and from where (api, cli, service, worker …). */
  readonly actor: string;
  readonly source: string;
  readonly lane?: Lane;
  readonly cooldownMs?: number;
  readonly confirmDelaysSec?: readonly number[];
  readonly expected?: string;
  readonly attemptLimit?: number;
  readonly now?: Date;
}
