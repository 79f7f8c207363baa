/**
 * Client-side access to the running orchestration (API, CLI, `npm start`, tests): start the
 * pollingControl singleton, send request-checks and mode switches through the workflows' updates
 * (never around them), read their status queries.
 */
import { WorkflowIdConflictPolicy, type Client } from '@temporalio/client';
import { pollingControl, type PollingControlArgs } from '../workflows/pollingControl.js';
import {
  configChangedSignal,
  controlStatusQuery,
  reconcileUpdate,
  requestCheckUpdate,
  schedulerStatusQuery,
  setModeUpdate,
} from '../workflows/messages.js';
import {
  pollingControlWorkflowId,
  schedulerWorkflowId,
  type ControlStatus,
  type PollingMode,
  type RequestCheckInput,
  type RequestCheckResult,
  type SchedulerStatus,
  type TaskQueueNames,
} from '../common/orchestration.js';

export interface OrchestrationRef {
  readonly client: Client;
  readonly taskQueues: TaskQueueNames;
  readonly workflowIdPrefix: string;
}

/** Starts pollingControl, or returns the running one (idempotent). */
export async function ensurePollingControl(ref: OrchestrationRef, extra: Omit<PollingControlArgs, 'taskQueues' | 'workflowIdPrefix'> = {}): Promise<string> {
  const handle = await ref.client.workflow.start(pollingControl, {
    workflowId: pollingControlWorkflowId(ref.workflowIdPrefix),
    taskQueue: ref.taskQueues.control,
    args: [{ taskQueues: ref.taskQueues, workflowIdPrefix: ref.workflowIdPrefix, ...extra }],
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
  });
  return handle.workflowId;
}

export async function requestCheck(ref: OrchestrationRef, carrierId: string, input: RequestCheckInput): Promise<RequestCheckResult> {
  const handle = ref.client.workflow.getHandle(schedulerWorkflowId(carrierId, ref.workflowIdPrefix));
  return handle.executeUpdate(requestCheckUpdate, { args: [input] });
}

export async function setMode(ref: OrchestrationRef, mode: PollingMode): Promise<{ mode: PollingMode; changed: boolean }> {
  return ref.client.workflow.getHandle(pollingControlWorkflowId(ref.workflowIdPrefix)).executeUpdate(setModeUpdate, { args: [mode] });
}

export async function reconcile(ref: OrchestrationRef): Promise<{ carriers: string[] }> {
  return ref.client.workflow.getHandle(pollingControlWorkflowId(ref.workflowIdPrefix)).executeUpdate(reconcileUpdate);
}

export async function notifyConfigChanged(ref: OrchestrationRef, carrierId: string): Promise<void> {
  await ref.client.workflow.getHandle(schedulerWorkflowId(carrierId, ref.workflowIdPrefix)).signal(configChangedSignal);
}

export async function controlStatus(ref: OrchestrationRef): Promise<ControlStatus> {
  return ref.client.workflow.getHandle(pollingControlWorkflowId(ref.workflowIdPrefix)).query(controlStatusQuery);
}

export async function schedulerStatus(ref: OrchestrationRef, carrierId: string): Promise<SchedulerStatus> {
  return ref.client.workflow.getHandle(schedulerWorkflowId(carrierId, ref.workflowIdPrefix)).query(schedulerStatusQuery);
}
