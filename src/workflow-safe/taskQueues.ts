import type { Priority } from '@temporalio/common';

/** The task queues of a deployment, passed down from pollingControl to every run it starts. Workflow-safe. */

export interface TaskQueueNames {
  readonly control: string;
  readonly card: string;
  /** Runs claimed from the priority lane; absent in runs started before it existed (then `card`). */
  readonly cardPriority?: string;
  readonly gateway: string;
  readonly ingest: string;
}

/** The task queue of a claimed card's run: the priority lane's own queue skips the normal backlog. */
export const cardTaskQueue = (queues: TaskQueueNames, fromPriority: boolean): string => (fromPriority ? (queues.cardPriority ?? queues.card) : queues.card);

/**
 * Temporal's priority key of the priority lane's runs (1 goes first; unset is the server's default,
 * 3). Their activities inherit it, so on the queues both lanes share (the gateway's) a request-check
 * goes ahead of the normal lane's backlog when the engine is the limit (docs/design.md §3).
 */
export const PRIORITY_LANE_KEY = 1;

/** Where a claimed card's run goes: its task queue and, for the priority lane, its Temporal priority. */
export function cardRunPlacement(queues: TaskQueueNames, fromPriority: boolean): { taskQueue: string; priority?: Priority } {
  return fromPriority ? { taskQueue: cardTaskQueue(queues, true), priority: { priorityKey: PRIORITY_LANE_KEY } } : { taskQueue: queues.card };
}
