/**
 * Starts accounts' carrierScheduler runs with the client, a few at a time, for pollingControl's
 * reconcile (docs/design.md, 'pollingControl').
 *
 * Not as children of pollingControl: the server records every child's start in its parent's
 * history under the parent's lock, one after the other, so a fleet of 1 011 accounts took
 * pollingControl 90–240 s to start with neither the server nor the workers busy (accounts bench,
 * 2026-12-07: 8–12 schedulers a second, the Temporal server at 12 % of a core). Started with the
 * client, each is a workflow of its own, started side by side. Already running is the normal case.
 */
import { WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy, type Client } from '@temporalio/client';
import type { CarrierSchedulerArgs } from '../workflows/scheduler/schedulerSettings.js';
import { schedulerWorkflowId } from '../workflow-safe/workflowIds.js';
import { LOOP_WORKFLOW_TASK_TIMEOUT_MS } from '../workflow-safe/loopTaskTimeout.js';
import { eachLimited } from '../runtime/eachLimited.js';

/** Starts under way at once: enough to keep the server's start path busy, few enough not to flood it. */
const START_CONCURRENCY = 20;

export interface SchedulerStarts {
  readonly started: number;
  readonly alreadyRunning: number;
  /** Accounts whose start failed (the next reconcile tries them again). */
  readonly failed: readonly string[];
}

export type SchedulerStarter = (runs: readonly CarrierSchedulerArgs[]) => Promise<SchedulerStarts>;

type Log = (message: string, fields: Record<string, unknown>) => void;

export function createSchedulerStarter(client: Client, log: Log): SchedulerStarter {
  return async (runs) => {
    let started = 0;
    let alreadyRunning = 0;
    const failed: string[] = [];
    await eachLimited(runs, START_CONCURRENCY, async (args) => {
      try {
        await client.workflow.start('carrierScheduler', {
          workflowId: schedulerWorkflowId(args.carrierId, args.workflowIdPrefix),
          taskQueue: args.taskQueues.control,
          args: [args],
          workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
          workflowTaskTimeout: LOOP_WORKFLOW_TASK_TIMEOUT_MS,
        });
        started += 1;
      } catch (error) {
        if (error instanceof WorkflowExecutionAlreadyStartedError) alreadyRunning += 1;
        else {
          failed.push(args.carrierId);
          log('could not start carrierScheduler', { carrierId: args.carrierId, error: String(error) });
        }
      }
    });
    return { started, alreadyRunning, failed };
  };
}
