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
