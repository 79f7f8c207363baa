/**
 * Worker versioning operations for the deploy tests: what deploy tooling runs (the same as
 * `temporal worker deployment set-current-version`), making a version current, sends new runs to
 * the workers of that version. Running runs stay pinned to theirs: card runs finish there, and the
 * loops (pollingControl, carrierScheduler) see the change at their next workflow task and continue
 * as new onto the new version (src/workflows/versionUpgrade.ts).
 */
import type { Client } from '@temporalio/client';
import { decodeVersioningBehavior, type VersioningBehavior, type WorkerDeploymentVersion } from '@temporalio/common';

export async function setCurrentDeploymentVersion(client: Client, version: WorkerDeploymentVersion, identity = 'card-poller'): Promise<void> {
  await client.workflowService.setWorkerDeploymentCurrentVersion({
    namespace: client.options.namespace,
    deploymentName: version.deploymentName,
    buildId: version.buildId,
    identity,
  });
}

export interface RunVersion {
  /** Undefined for a run of an unversioned worker. */
  readonly behavior: VersioningBehavior | undefined;
  readonly buildId: string | undefined;
}

/** The versioning behavior and build id a workflow run currently executes with. */
export async function runVersion(client: Client, workflowId: string, runId?: string): Promise<RunVersion> {
  const description = await client.workflow.getHandle(workflowId, runId).describe();
  const info = description.raw.workflowExecutionInfo?.versioningInfo;
  return { behavior: decodeVersioningBehavior(info?.behavior), buildId: info?.deploymentVersion?.buildId ?? undefined };
}
