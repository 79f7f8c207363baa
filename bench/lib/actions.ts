/**
 * What a workflow history costs, counted from its events: history events, workflow tasks (and
 * their failures and timeouts), activity tasks, local activities, timers, child starts, and Temporal
 * Cloud actions by Temporal's published rules (https://docs.temporal.io/cloud/actions; the rules as
 * applied are listed in docs/capacity.md, "Actions"). Used by footprint, throughput (per check, in
 * both run shapes) and overload (task failures and timeouts).
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import proto from '@temporalio/proto';
import { round } from './stats.js';

export type HistoryEvent = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>[number];

/**
 * A workflow task that ran this share of its timeout or longer and was followed by a new one with
 * nothing but its own commands in between was a workflow-task heartbeat: the SDK asks for a new
 * task at 80 % of the timeout while local activities are still running (docs.temporal.io/local-activity).
 */
const HEARTBEAT_TASK_SHARE = 0.75;

export interface EventCounts {
  events: number;
  workflowTasks: number;
  /** WorkflowTaskFailed events (e.g. UNHANDLED_COMMAND: a completion the server refused). */
  workflowTaskFailures: number;
  workflowTaskTimeouts: number;
  /** Failures by cause (the enum's name without its prefix). */
  workflowTaskFailureCauses: Record<string, number>;
  activityTasks: number;
  localActivities: number;
  /** Workflow tasks the worker completed only to extend its lease while local activities ran. */
  workflowTaskHeartbeats: number;
  timers: number;
  childStarts: number;
  actions: number;
  actionsByKind: Record<string, number>;
}

export function emptyCounts(): EventCounts {
  return {
    events: 0,
    workflowTasks: 0,
    workflowTaskFailures: 0,
    workflowTaskTimeouts: 0,
    workflowTaskFailureCauses: {},
    activityTasks: 0,
    localActivities: 0,
    workflowTaskHeartbeats: 0,
    timers: 0,
    childStarts: 0,
    actions: 0,
    actionsByKind: {},
  };
}

/** A protobuf timestamp in ms (0 when absent). */
export const millis = (time: { seconds?: unknown; nanos?: number | null } | null | undefined): number =>
  time ? Number(time.seconds ?? 0) * 1000 + Math.floor((time.nanos ?? 0) / 1e6) : 0;

export function eventMs(event: HistoryEvent): number {
  return millis(event.eventTime);
}

/** Events a workflow task's own commands and messages write right after its WorkflowTaskCompleted. */
function isCommandEvent(event: HistoryEvent): boolean {
  return Boolean(
    event.markerRecordedEventAttributes ||
    event.activityTaskScheduledEventAttributes ||
    event.activityTaskCancelRequestedEventAttributes ||
    event.timerStartedEventAttributes ||
    event.timerCanceledEventAttributes ||
    event.startChildWorkflowExecutionInitiatedEventAttributes ||
    event.signalExternalWorkflowExecutionInitiatedEventAttributes ||
    event.requestCancelExternalWorkflowExecutionInitiatedEventAttributes ||
    event.upsertWorkflowSearchAttributesEventAttributes ||
    event.workflowPropertiesModifiedEventAttributes ||
    event.workflowExecutionUpdateAcceptedEventAttributes ||
    event.workflowExecutionUpdateCompletedEventAttributes,
  );
}

const failureCause = (cause: number | null | undefined): string =>
  (proto.temporal.api.enums.v1.WorkflowTaskFailedCause[cause ?? 0] ?? String(cause)).replace(/^WORKFLOW_TASK_FAILED_CAUSE_/, '');

/**
 * Adds one history's events (or a contiguous part of it; parts of several runs one after the
 * other) to `into`. Actions, by docs.temporal.io/cloud/actions:
 * - workflow started 1 (client start, child start, continue-as-new: the new run's started event);
 * - a child start 2: the intent (StartChildWorkflowExecutionInitiated, on the parent) and the
 *   start (the child's own started event);
 * - an activity scheduled 1, each retry 1 (ActivityTaskStarted.attempt − 1);
 * - all local activities of one workflow task 1 together (their markers follow its
 *   WorkflowTaskCompleted), each workflow-task heartbeat 1 more, each non-first local attempt 1
 *   (WorkflowTaskCompleted.meteringMetadata);
 * - a timer 1 (the implicit one of `condition(…, timeout)` included), a signal 1, an accepted update
 *   1, a search-attribute upsert 1 (those given at start are free).
 * Queries and rejected updates are billed too but leave no event: not counted here.
 */
export function countEvents(events: readonly HistoryEvent[], into: EventCounts = emptyCounts()): EventCounts {
  const add = (kind: string, n = 1): void => {
    into.actionsByKind[kind] = (into.actionsByKind[kind] ?? 0) + n;
    into.actions += n;
  };
  // The workflow task whose commands are being written: did it record markers, was it a long one,
  // and has anything but its own commands happened since it completed?
  let task: { markers: boolean; long: boolean; commandsOnly: boolean } | undefined;
  let taskTimeoutMs = 10_000;
  let taskStartedMs: number | undefined;
  const closeTask = (heartbeat: boolean): void => {
    if (task === undefined) return;
    if (heartbeat) {
      into.workflowTaskHeartbeats += 1;
      add('workflow task heartbeat');
    } else if (task.markers) add('local activities (one per workflow task)');
    task = undefined;
  };
  for (const event of events) {
    into.events += 1;
    if (task !== undefined && !isCommandEvent(event)) {
      if (event.workflowTaskScheduledEventAttributes) closeTask(task.commandsOnly && task.long);
      else task.commandsOnly = false;
    }
    if (event.workflowExecutionStartedEventAttributes) add('workflow started');
    else if (event.startChildWorkflowExecutionInitiatedEventAttributes) {
      into.childStarts += 1;
      add('child start intent');
    } else if (event.activityTaskScheduledEventAttributes) add('activity scheduled');
    else if (event.activityTaskStartedEventAttributes) {
      into.activityTasks += 1;
      const retries = (event.activityTaskStartedEventAttributes.attempt ?? 1) - 1;
      if (retries > 0) add('activity retried', retries);
    } else if (event.markerRecordedEventAttributes) {
      into.localActivities += 1;
      // Markers before any WorkflowTaskCompleted of this list belong to a task that completed just
      // before the part being counted.
      task ??= { markers: false, long: false, commandsOnly: true };
      task.markers = true;
    } else if (event.workflowTaskScheduledEventAttributes) {
      const timeout = event.workflowTaskScheduledEventAttributes.startToCloseTimeout;
      if (timeout) taskTimeoutMs = millis(timeout);
    } else if (event.workflowTaskStartedEventAttributes) taskStartedMs = eventMs(event);
    else if (event.workflowTaskCompletedEventAttributes) {
      closeTask(false);
      into.workflowTasks += 1;
      const ranMs = taskStartedMs === undefined ? 0 : eventMs(event) - taskStartedMs;
      task = { markers: false, long: ranMs >= HEARTBEAT_TASK_SHARE * taskTimeoutMs, commandsOnly: true };
      const retried = event.workflowTaskCompletedEventAttributes.meteringMetadata?.nonfirstLocalActivityExecutionAttempts ?? 0;
      if (retried > 0) add('local activity retried', retried);
    } else if (event.workflowTaskFailedEventAttributes) {
      into.workflowTaskFailures += 1;
      const cause = failureCause(event.workflowTaskFailedEventAttributes.cause);
      into.workflowTaskFailureCauses[cause] = (into.workflowTaskFailureCauses[cause] ?? 0) + 1;
    } else if (event.workflowTaskTimedOutEventAttributes) into.workflowTaskTimeouts += 1;
    else if (event.timerStartedEventAttributes) {
      into.timers += 1;
      add('timer started');
    } else if (event.workflowExecutionSignaledEventAttributes) add('signal');
    else if (event.workflowExecutionUpdateAcceptedEventAttributes) add('update accepted');
    else if (event.upsertWorkflowSearchAttributesEventAttributes) add('search attributes upserted');
  }
  closeTask(false);
  return into;
}

/** Every count divided by `units` (runs, checks, rounds); 3 decimals. */
export function perUnit(counts: EventCounts, units: number): EventCounts {
  const d = (n: number): number => (units > 0 ? round(n / units, 3) : 0);
  const each = (record: Record<string, number>): Record<string, number> => Object.fromEntries(Object.entries(record).map(([kind, n]) => [kind, d(n)]));
  return {
    events: d(counts.events),
    workflowTasks: d(counts.workflowTasks),
    workflowTaskFailures: d(counts.workflowTaskFailures),
    workflowTaskTimeouts: d(counts.workflowTaskTimeouts),
    workflowTaskFailureCauses: each(counts.workflowTaskFailureCauses),
    activityTasks: d(counts.activityTasks),
    localActivities: d(counts.localActivities),
    workflowTaskHeartbeats: d(counts.workflowTaskHeartbeats),
    timers: d(counts.timers),
    childStarts: d(counts.childStarts),
    actions: d(counts.actions),
    actionsByKind: each(counts.actionsByKind),
  };
}

/** Sum of two counts (e.g. a card run's share and the scheduler's, per check). */
export function addCounts(a: EventCounts, b: EventCounts): EventCounts {
  const merge = (x: Record<string, number>, y: Record<string, number>): Record<string, number> => {
    const out = { ...x };
    for (const [kind, n] of Object.entries(y)) out[kind] = round((out[kind] ?? 0) + n, 3);
    return out;
  };
  const sum = (x: number, y: number): number => round(x + y, 3);
  return {
    events: sum(a.events, b.events),
    workflowTasks: sum(a.workflowTasks, b.workflowTasks),
    workflowTaskFailures: sum(a.workflowTaskFailures, b.workflowTaskFailures),
    workflowTaskTimeouts: sum(a.workflowTaskTimeouts, b.workflowTaskTimeouts),
    workflowTaskFailureCauses: merge(a.workflowTaskFailureCauses, b.workflowTaskFailureCauses),
    activityTasks: sum(a.activityTasks, b.activityTasks),
    localActivities: sum(a.localActivities, b.localActivities),
    workflowTaskHeartbeats: sum(a.workflowTaskHeartbeats, b.workflowTaskHeartbeats),
    timers: sum(a.timers, b.timers),
    childStarts: sum(a.childStarts, b.childStarts),
    actions: sum(a.actions, b.actions),
    actionsByKind: merge(a.actionsByKind, b.actionsByKind),
  };
}

export async function fetchEvents(handle: WorkflowHandle): Promise<HistoryEvent[]> {
  return (await handle.fetchHistory()).events ?? [];
}

/** One run of a workflow id and its events. */
export interface RunHistory {
  readonly runId: string;
  readonly events: HistoryEvent[];
}

/**
 * Every run of one workflow id whose history reaches back past `since` (default: all), newest
 * first, found by following each run's started event to the run it continued (no visibility query:
 * the newest runs would lag there).
 */
export async function runChain(client: Client, workflowId: string, since?: Date): Promise<RunHistory[]> {
  const out: RunHistory[] = [];
  let runId: string | undefined;
  for (;;) {
    const handle = client.workflow.getHandle(workflowId, runId);
    const events = await fetchEvents(handle);
    const started = events[0];
    const id = runId ?? (await handle.describe()).runId;
    out.push({ runId: id, events });
    const previous = started?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId;
    if (!previous || (since !== undefined && started !== undefined && eventMs(started) < since.getTime())) return out;
    runId = previous;
  }
}

/** Events of every run of one workflow id (continue-as-new included) inside [from, to), oldest run first. */
export async function eventsInWindow(client: Client, workflowId: string, from: Date, to: Date): Promise<HistoryEvent[]> {
  const runs = await runChain(client, workflowId, from);
  return runs.reverse().flatMap((run) => run.events.filter((event) => eventMs(event) >= from.getTime() && eventMs(event) < to.getTime()));
}
