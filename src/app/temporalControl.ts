/**
 * Client-side access to the running orchestration (API, CLI, `npm start`, tests): start the
 * pollingControl singleton, send request-checks and mode switches through the workflows' updates
 * (never around them), read their status queries.
 */
import { randomUUID } from 'node:crypto';
import {
  ApplicationFailure,
  ScheduleAlreadyRunning,
  ScheduleOverlapPolicy,
  ServiceError,
  WorkflowIdConflictPolicy,
  WorkflowUpdateFailedError,
  isGrpcServiceError,
  type Client,
} from '@temporalio/client';
import { pollingControl, type PollingControlArgs } from '../workflows/pollingControl.js';
import { storageMaintenance } from '../workflows/storageMaintenance.js';
import { configChangedSignal, priorityRequestedUpdate, requestCheckUpdate, schedulerStatusQuery, setModeUpdate, wakeSignal } from '../workflows/messages.js';
import { SCHEDULER_CONTINUING_AS_NEW, type RequestCheckInput, type RequestCheckResult } from '../workflow-safe/requestCheck.js';
import { pollingControlWorkflowId, schedulerWorkflowId, storageMaintenanceScheduleId } from '../workflow-safe/workflowIds.js';
import type { SchedulerStatus } from '../workflow-safe/loopStatus.js';
import type { PollingMode } from '../workflow-safe/pollingMode.js';
import type { TaskQueueNames } from '../workflow-safe/taskQueues.js';
import { LOOP_WORKFLOW_TASK_TIMEOUT_MS } from '../workflow-safe/loopTaskTimeout.js';
import { WakeCoalescer } from './wakeCoalescer.js';
import type { CarrierQueueStore } from '../redis/carrierQueueStore.js';

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
    workflowTaskTimeout: LOOP_WORKFLOW_TASK_TIMEOUT_MS,
  });
  return handle.workflowId;
}

/**
 * Creates the hourly storage-maintenance schedule unless it exists (idempotent), running it once
 * at creation so a new deployment has its partitions at once. Returns whether it was created.
 */
export async function ensureStorageMaintenance(ref: OrchestrationRef, every = '1 hour'): Promise<boolean> {
  const scheduleId = storageMaintenanceScheduleId(ref.workflowIdPrefix);
  try {
    await ref.client.schedule.create({
      scheduleId,
      spec: { intervals: [{ every }] },
      action: { type: 'startWorkflow', workflowType: storageMaintenance, workflowId: scheduleId, taskQueue: ref.taskQueues.control, args: [] },
      // A run still deleting a backlog is not joined by a second one.
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
      state: { triggerImmediately: true, note: 'observation partitions ahead, data past RETENTION_MONTHS removed' },
    });
    return true;
  } catch (error) {
    if (error instanceof ScheduleAlreadyRunning) return false;
    throw error;
  }
}

/**
 * How long a request-check's update that was not completed is sent again: while the scheduler
 * continues as new (normally well under a second), is starved of CPU (a while), or its workflow
 * task sat with a worker killed mid-task: the server then refuses updates ("Workflow Task in
 * failed state") from that task's timeout (LOOP_WORKFLOW_TASK_TIMEOUT_MS) until a retry of it
 * completes on another worker, which replays the run's history first. So: one task timeout and
 * as long again for the retry.
 */
export const UPDATE_RETRY_WINDOW_MS = 2 * LOOP_WORKFLOW_TASK_TIMEOUT_MS;
/**
 * gRPC codes of an update that did not complete and may be sent again under the same update id
 * (the server deduplicates): FAILED_PRECONDITION (see below), DEADLINE_EXCEEDED and ABORTED
 * (the workflow task carrying it timed out or failed, seen when the workers are starved of CPU),
 * UNAVAILABLE and RESOURCE_EXHAUSTED (the server was busy).
 */
export const GRPC_RETRYABLE_UPDATE_CODES = new Set([9, 4, 10, 14, 8]);

/**
 * Update errors that mean "not completed, send it again": the run was about to continue-as-new
 * and rejected it, or the workflow task that carried it failed or timed out (the server fails a
 * task completing continue-as-new when another message arrived meanwhile, and aborts the updates
 * that task carried with FAILED_PRECONDITION).
 */
function notAccepted(error: unknown): boolean {
  if (error instanceof WorkflowUpdateFailedError) return error.cause instanceof ApplicationFailure && error.cause.type === SCHEDULER_CONTINUING_AS_NEW;
  return error instanceof ServiceError && isGrpcServiceError(error.cause) && GRPC_RETRYABLE_UPDATE_CODES.has(Number(error.cause.code));
}

/** A ServiceError's message does not say which gRPC status it wraps; operators need it. */
function withGrpcCode(error: unknown): unknown {
  if (error instanceof ServiceError && isGrpcServiceError(error.cause)) error.message = `${error.message} (gRPC ${error.cause.code}: ${error.cause.details})`;
  return error;
}

export async function requestCheck(ref: OrchestrationRef, carrierId: string, input: RequestCheckInput): Promise<RequestCheckResult> {
  // No run id: a retry addresses the scheduler's current run, i.e. the one it continued as.
  const handle = ref.client.workflow.getHandle(schedulerWorkflowId(carrierId, ref.workflowIdPrefix));
  // One update id for every attempt: the server deduplicates should an attempt have landed after all.
  const updateId = randomUUID();
  const started = Date.now();
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await handle.executeUpdate(requestCheckUpdate, { args: [input], updateId });
    } catch (error) {
      if (!notAccepted(error) || Date.now() - started > UPDATE_RETRY_WINDOW_MS) throw withGrpcCode(error);
      await new Promise((resolve) => setTimeout(resolve, Math.min(50 * attempt, 500)));
    }
  }
}

/** Whether the account's scheduler has an open run (throws WorkflowNotFoundError when it never ran). */
export async function schedulerRunning(ref: OrchestrationRef, carrierId: string): Promise<boolean> {
  const description = await ref.client.workflow.getHandle(schedulerWorkflowId(carrierId, ref.workflowIdPrefix)).describe();
  return description.status.name === 'RUNNING';
}

/**
 * Wakes the account's scheduler to claim a card whose request-check the caller served itself;
 * resolves once its run accepted the wake-up (a closing run refuses it: WorkflowUpdateFailedError).
 */
export async function wakeScheduler(ref: OrchestrationRef, carrierId: string, cardId: string): Promise<void> {
  const workflowId = schedulerWorkflowId(carrierId, ref.workflowIdPrefix);
  // Per client (one per process): callers arriving while a wake-up is in flight share the next one.
  let coalescer = wakeCoalescers.get(ref.client);
  if (coalescer === undefined) {
    coalescer = new WakeCoalescer();
    wakeCoalescers.set(ref.client, coalescer);
  }
  await coalescer.wake(workflowId, () => ref.client.workflow.getHandle(workflowId).executeUpdate(priorityRequestedUpdate, { args: [{ cardId }] }));
}

const wakeCoalescers = new WeakMap<Client, WakeCoalescer>();

export async function setMode(ref: OrchestrationRef, mode: PollingMode): Promise<{ mode: PollingMode; changed: boolean }> {
  return ref.client.workflow.getHandle(pollingControlWorkflowId(ref.workflowIdPrefix)).executeUpdate(setModeUpdate, { args: [mode] });
}

/**
 * The accounts whose scheduler has an open run, as the server's visibility store has it (seconds
 * behind at most: a scheduler started or ended just now may be missing or still listed).
 */
export async function runningSchedulers(ref: Pick<OrchestrationRef, 'client' | 'workflowIdPrefix'>): Promise<Set<string>> {
  const prefix = schedulerWorkflowId('', ref.workflowIdPrefix);
  const running = new Set<string>();
  for await (const workflow of ref.client.workflow.list({ query: `WorkflowType = 'carrierScheduler' AND ExecutionStatus = 'Running'` })) {
    if (workflow.workflowId.startsWith(prefix)) running.add(workflow.workflowId.slice(prefix.length));
  }
  return running;
}

/** Wakes the sleeping schedulers of these accounts (lua/wakeIfIdle.lua decided they sleep past a new due); one not running is skipped. */
export async function wakeSchedulers(ref: OrchestrationRef, carrierIds: readonly string[]): Promise<void> {
  await Promise.allSettled(
    carrierIds.map((carrierId) => ref.client.workflow.getHandle(schedulerWorkflowId(carrierId, ref.workflowIdPrefix)).signal(wakeSignal)),
  );
}

export async function notifyConfigChanged(ref: OrchestrationRef, carrierId: string): Promise<void> {
  await ref.client.workflow.getHandle(schedulerWorkflowId(carrierId, ref.workflowIdPrefix)).signal(configChangedSignal);
}

/**
 * The account's scheduler status as it stands: a claim loop activity's (SCHEDULER_LOOP=activity)
 * published view when one is fresh in Redis — the workflow's answer is as old as the loop's lap —
 * else the workflow's query.
 */
export async function currentSchedulerStatus(ref: OrchestrationRef, store: Pick<CarrierQueueStore, 'loopView'>, carrierId: string): Promise<SchedulerStatus> {
  const published = await store.loopView(carrierId).catch(() => null);
  if (published !== null) return JSON.parse(published) as SchedulerStatus;
  return schedulerStatus(ref, carrierId);
}

export async function schedulerStatus(ref: OrchestrationRef, carrierId: string): Promise<SchedulerStatus> {
  return ref.client.workflow.getHandle(schedulerWorkflowId(carrierId, ref.workflowIdPrefix)).query(schedulerStatusQuery);
}
