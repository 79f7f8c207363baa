/**
 * What one workflow run costs the server, read from its history (fetchHistory): events, and
 * workflow tasks (WorkflowTaskCompleted events). Only completed runs count: a run still going has
 * a partial history.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import { round } from './stats.js';

type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;

export interface Spread {
  readonly mean: number;
  readonly min: number;
  readonly max: number;
}

export interface HistoryShape {
  /** Completed runs read. */
  readonly sampled: number;
  /** Runs skipped because they had not completed yet. */
  readonly incomplete: number;
  readonly events: Spread;
  readonly workflowTasks: Spread;
  /** Runs started as a child of another workflow (carrierScheduler) — tells the start mode apart. */
  readonly withParent: number;
}

function spread(values: readonly number[]): Spread {
  if (values.length === 0) return { mean: 0, min: 0, max: 0 };
  return { mean: round(values.reduce((a, b) => a + b, 0) / values.length, 2), min: Math.min(...values), max: Math.max(...values) };
}

export async function historyShape(client: Client, runs: readonly { workflowId: string; runId?: string }[]): Promise<HistoryShape> {
  const events: number[] = [];
  const tasks: number[] = [];
  let incomplete = 0;
  let withParent = 0;
  for (const run of runs) {
    const history: History = await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
    const list = history.events ?? [];
    if (!list.at(-1)?.workflowExecutionCompletedEventAttributes) {
      incomplete += 1;
      continue;
    }
    events.push(list.length);
    tasks.push(list.filter((event) => event.workflowTaskCompletedEventAttributes).length);
    if (list[0]?.workflowExecutionStartedEventAttributes?.parentWorkflowExecution) withParent += 1;
  }
  return { sampled: events.length, incomplete, events: spread(events), workflowTasks: spread(tasks), withParent };
}
