/**
 * pollingControl: the singleton that holds the global polling mode and keeps one
 * carrierScheduler running per enabled carrier account.
 *
 * The mode lives in PostgreSQL (`system_config`); schedulers read it every round, so switching to
 * `legacy` stops claiming at the next tick while in-flight cards finish, and switching to
 * `carrier` rebuilds Redis from PostgreSQL under a lock before claiming resumes.
 */
import {
  ParentClosePolicy,
  WorkflowIdReusePolicy,
  allHandlersFinished,
  condition,
  log,
  proxyActivities,
  setHandler,
  startChild,
  workflowInfo,
  ApplicationFailure,
  sleep,
  patched,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { loopFailures } from './loopFailures.js';
import { continueAsNewToCurrentVersion, targetVersionChanged } from './versionUpgrade.js';
import type { ControlActivities } from '../activities/control.js';
import { POLLING_MODES, type PollingMode } from '../workflow-safe/pollingMode.js';
import { schedulerWorkflowId } from '../workflow-safe/workflowIds.js';
import type { TaskQueueNames } from '../workflow-safe/taskQueues.js';
import { carrierScheduler, type CarrierSchedulerArgs } from './carrierScheduler.js';
import { controlStatusQuery, reconcileSignal, reconcileUpdate, setModeSignal, setModeUpdate } from './messages.js';

export interface PollingControlArgs {
  readonly taskQueues: TaskQueueNames;
  readonly workflowIdPrefix?: string;
  /** Options passed to every scheduler (tests shorten them). */
  readonly scheduler?: Pick<CarrierSchedulerArgs, 'maxHistoryEvents' | 'tickMs'>;
  /** How often accounts are re-read even without a reconcile request. */
  readonly reconcileEveryMs?: number;
  readonly maxHistoryEvents?: number;
  /** setMode signals not yet applied, carried over continue-as-new. */
  readonly queuedModes?: readonly PollingMode[];
  /** Heartbeat timeout of the mode switch (tests shorten it); {@link SWITCH_HEARTBEAT_TIMEOUT_MS} when absent. */
  readonly switchHeartbeatTimeoutMs?: number;
}

/**
 * The mode switch heartbeats at each step and at every page of its Redis rebuild (pages extend a
 * 60 s rebuild lock, so they are far apart only when the lock is being lost anyway): a worker that
 * dies mid-switch is noticed after this long and the switch retried, instead of after the
 * 30-minute start-to-close timeout.
 */
const SWITCH_HEARTBEAT_TIMEOUT_MS = 2 * 60_000;

/**
 * Continue-as-new once the history has this many events (unless the args set another) or bytes:
 * small enough that replaying it (after a worker restart or a cache eviction) stays far inside
 * the workflow task timeout on a busy machine, as for the schedulers.
 */
const DEFAULT_MAX_HISTORY_EVENTS = 2000;
const DEFAULT_MAX_HISTORY_BYTES = 2 * 1024 * 1024;
const PREVIOUS_MAX_HISTORY_EVENTS = 5000;
const SMALLER_HISTORY_PATCH = 'control-smaller-history';
/** Accounts are re-read this often even when nobody asks for a reconcile (an account enabled in SQL). */
const DEFAULT_RECONCILE_EVERY_MS = 60_000;
/** Backoff base of this loop's failed activities: base × 2^consecutive failures, at most 30 s (loopFailures). */
const FAILURE_BACKOFF_BASE_MS = 1000;

export async function pollingControl(args: PollingControlArgs): Promise<void> {
  const control = proxyActivities<ControlActivities>({
    taskQueue: args.taskQueues.control,
    // A switch to carrier mode rebuilds Redis from PostgreSQL: minutes for millions of cards.
    startToCloseTimeout: '30 minutes',
    retry: { initialInterval: '1 s', maximumInterval: '30 s', maximumAttempts: 10 },
  });
  // The one heartbeating activity gets a heartbeat timeout; the others do not heartbeat, so they must not have one.
  const { switchMode: switchModeActivity } = proxyActivities<Pick<ControlActivities, 'switchMode'>>({
    taskQueue: args.taskQueues.control,
    startToCloseTimeout: '30 minutes',
    heartbeatTimeout: args.switchHeartbeatTimeoutMs ?? SWITCH_HEARTBEAT_TIMEOUT_MS,
    retry: { initialInterval: '1 s', maximumInterval: '30 s', maximumAttempts: 10 },
  });
  // Like the schedulers, this loop outlives any outage of what its activities need.
  const failures = loopFailures('pollingControl', 'singleton', FAILURE_BACKOFF_BASE_MS);
  let mode: PollingMode | undefined;
  while (mode === undefined) {
    try {
      mode = await control.readMode();
    } catch (error) {
      failures.record('readMode', error);
      await sleep(failures.backoffMs() ?? FAILURE_BACKOFF_BASE_MS);
    }
  }
  failures.succeeded('readMode');
  // Decided at the start of the run: a run of the previous release keeps its 5 000-event rollover.
  const smallerHistory = patched(SMALLER_HISTORY_PATCH);
  const maxHistory = args.maxHistoryEvents ?? (smallerHistory ? DEFAULT_MAX_HISTORY_EVENTS : PREVIOUS_MAX_HISTORY_EVENTS);
  const maxHistoryBytes = smallerHistory ? DEFAULT_MAX_HISTORY_BYTES : Number.POSITIVE_INFINITY;
  let carriers: string[] = [];
  let switching = false;
  let reconcileRequested = true;
  const queuedModes: PollingMode[] = [...(args.queuedModes ?? [])];

  const switchMode = async (target: PollingMode): Promise<{ mode: PollingMode; changed: boolean }> => {
    // One switch at a time: a second request waits for the first to complete.
    await condition(() => !switching);
    switching = true;
    try {
      const result = await switchModeActivity({ mode: target, actor: 'pollingControl' });
      mode = target;
      reconcileRequested = true;
      return { mode: target, changed: result.changed };
    } finally {
      switching = false;
    }
  };

  setHandler(setModeUpdate, switchMode, {
    validator: (target: PollingMode) => {
      if (!POLLING_MODES.includes(target))
        throw ApplicationFailure.nonRetryable(`mode must be "carrier" or "legacy", got ${JSON.stringify(target)}`, 'invalid_mode');
    },
  });
  setHandler(setModeSignal, (target) => {
    if (POLLING_MODES.includes(target)) queuedModes.push(target);
    else log.warn('dropping invalid setMode signal', { mode: String(target) });
  });
  setHandler(reconcileUpdate, async () => ({ carriers: (carriers = await reconcile(args, control)) }));
  setHandler(reconcileSignal, () => void (reconcileRequested = true));
  setHandler(controlStatusQuery, () => ({ mode: mode ?? 'carrier', carriers, switching, ...failures.view() }));

  for (;;) {
    while (queuedModes.length > 0 && failures.backoffMs() === undefined) {
      const target = queuedModes[0];
      if (!target) break;
      try {
        await switchMode(target);
        queuedModes.shift();
        failures.succeeded('switchMode');
      } catch (error) {
        // Kept at the head of the queue: the switch is tried again after the backoff.
        failures.record('switchMode', error);
      }
    }
    if (reconcileRequested) {
      reconcileRequested = false;
      try {
        carriers = await reconcile(args, control);
        failures.succeeded('reconcile');
      } catch (error) {
        reconcileRequested = true;
        failures.record('reconcile', error);
      }
    }
    const info = workflowInfo();
    if (info.historyLength >= maxHistory || info.historySize >= maxHistoryBytes || info.continueAsNewSuggested || targetVersionChanged()) {
      await condition(allHandlersFinished);
      // The next run starts on the current worker-deployment version (src/workflows/versionUpgrade.ts).
      await continueAsNewToCurrentVersion<typeof pollingControl>({ ...args, queuedModes: [...queuedModes] });
    }
    const backoff = failures.backoffMs();
    if (backoff !== undefined) {
      await sleep(backoff);
      continue;
    }
    const woke = await condition(() => reconcileRequested || queuedModes.length > 0, args.reconcileEveryMs ?? DEFAULT_RECONCILE_EVERY_MS);
    if (!woke) reconcileRequested = true;
  }
}

/** Starts a scheduler for every enabled account that has none running. Returns the enabled ids. */
async function reconcile(args: PollingControlArgs, control: ControlActivities): Promise<string[]> {
  // A Redis that lost its data (flushed, failed over to an empty replica) is rebuilt from PostgreSQL.
  if (await control.ensureRedisIntact()) log.warn('Redis had lost its data; rebuilt from PostgreSQL');
  const enabled = await control.listEnabledCarriers();
  await Promise.all(
    enabled.map(async (carrierId: string) => {
      try {
        await startChild(carrierScheduler, {
          workflowId: schedulerWorkflowId(carrierId, args.workflowIdPrefix),
          taskQueue: args.taskQueues.control,
          args: [{ carrierId, taskQueues: args.taskQueues, workflowIdPrefix: args.workflowIdPrefix ?? '', ...args.scheduler }],
          parentClosePolicy: ParentClosePolicy.ABANDON,
          workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
        });
      } catch (error) {
        // Already running is the normal case: schedulers outlive control's continue-as-new.
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) {
          log.warn('could not start carrierScheduler', { carrierId, error: String(error) });
        }
      }
    }),
  );
  return enabled;
}
