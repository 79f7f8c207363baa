/** A request-check as the API, the scheduler's update and its activity exchange it. Workflow-safe. */
import type { CheckType } from './checkTypes.js';

/**
 * Failure type of a requestCheck update rejected because the scheduler run is about to
 * continue-as-new: nothing was done, the same update succeeds on the next run (clients retry).
 */
export const SCHEDULER_CONTINUING_AS_NEW = 'scheduler_continuing_as_new';

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
