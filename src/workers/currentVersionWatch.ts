/**
 * Whether the control queue's current worker-deployment version is still this worker's, for the
 * claim loop laps (SCHEDULER_LOOP=activity; docs/design.md, 'The claim loop as an activity').
 *
 * A scheduler learns that another version became current from its workflow task's started event
 * (`targetVersionChanged()`, src/workflows/versionUpgrade.ts). While a lap runs the scheduler has
 * no workflow task for up to 10 minutes, so it would stay on the old version that long (and the
 * version could not drain). The lap asks here instead and ends when the answer is no: the workflow
 * task that takes the lap's result sees the change and continues as new onto the current version.
 *
 * One DescribeTaskQueue per process every {@link CURRENT_VERSION_CHECK_MS} at most, whatever the
 * number of laps: each lap reads the answer shared by all.
 */
import type { Client } from '@temporalio/client';
import type { WorkerDeploymentVersion } from '@temporalio/common';

/** `TASK_QUEUE_TYPE_WORKFLOW` (the enum is in @temporalio/proto, a dev dependency here). */
const WORKFLOW_TASK_QUEUE = 1;

/** How old an answer may be: a version switch reaches a running lap within this (and its tick). */
const CURRENT_VERSION_CHECK_MS = 5_000;

/**
 * Resolves true once the task queue's current version is set and is another than `own`; false
 * while it is `own`, when no current version is set, and when the server cannot be asked (the lap
 * goes on: its own end still hands back within 10 minutes).
 */
export function currentVersionLeft(client: Client, taskQueue: string, own: WorkerDeploymentVersion): () => Promise<boolean> {
  let last: { readonly at: number; readonly answer: Promise<boolean> } | undefined;
  const ask = async (): Promise<boolean> => {
    const response = await client.workflowService.describeTaskQueue({
      namespace: client.options.namespace,
      taskQueue: { name: taskQueue },
      taskQueueType: WORKFLOW_TASK_QUEUE,
    });
    const current = response.versioningInfo?.currentDeploymentVersion;
    if (!current?.buildId) return false;
    return current.deploymentName !== own.deploymentName || current.buildId !== own.buildId;
  };
  return () => {
    const now = Date.now();
    if (last === undefined || now - last.at >= CURRENT_VERSION_CHECK_MS) last = { at: now, answer: ask().catch(() => false) };
    return last.answer;
  };
}
