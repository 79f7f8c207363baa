/**
 * pollingControl: the singleton that holds the global polling mode and keeps one
 * carrierScheduler running per enabled carrier account.
 *
 * The mode lives in PostgreSQL (`system_config`); schedulers read it every round, so switching to
 * `legacy` stops claiming at the next tick while in-flight cards finish, and switching to
 * `carrier` rebuilds Redis from PostgreSQL under a lock before claiming resumes.
 *
 * The loop's state and decisions are ControlState's (control/controlState.ts, unit-tested); this
 * file wires them to the activities, child starts, timers, signals and updates, in an order the
 * recorded histories (test/replay) pin down: the commands it emits must not change.
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
  sleep,
  patched,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { loopFailures } from './loopFailures.js';
import { continueAsNewToCurrentVersion, targetVersionChanged } from './versionUpgrade.js';
import type { ControlActivities } from '../activities/control.js';
import type { PollingMode } from '../workflow-safe/pollingMode.js';
import { schedulerWorkflowId } from '../workflow-safe/workflowIds.js';
import { LOOP_WORKFLOW_TASK_TIMEOUT_MS } from '../workflow-safe/loopTaskTimeout.js';
import { carrierScheduler } from './carrierScheduler.js';
import { controlStatusQuery, reconcileSignal, reconcileUpdate, setModeSignal, setModeUpdate } from './messages.js';
import { ControlState, type PollingControlArgs } from './control/controlState.js';

export type { PollingControlArgs } from './control/controlState.js';

/**
 * The mode switch heartbeats at each step and at every page of its Redis rebuild (pages extend a
 * 60 s rebuild lock, so they are far apart only when the lock is being lost anyway): a worker that
 * dies mid-switch is noticed after this long and the switch retried, instead of after the
 * 30-minute start-to-close timeout.
 */
const SWITCH_HEARTBEAT_TIMEOUT_MS = 2 * 60_000;
/** The Redis guard and the scheduler starts heartbeat every 5 s while they run (src/activities/control.ts). */
const REBUILD_HEARTBEAT_TIMEOUT_MS = 30_000;
/** Runs from this patch on continue as new at 2 000 events or 2 MiB (before: 5 000 events). */
const SMALLER_HISTORY_PATCH = 'control-smaller-history';
/**
 * Runs from this patch on start schedulers only for the accounts without a running one
 * (listSchedulersToStart: Temporal visibility), not a child start per enabled account per reconcile.
 */
const START_MISSING_PATCH = 'control-start-missing-schedulers';
/** Schedulers started per workflow task (from the patch above on), each chunk started before the next. */
const SCHEDULER_START_CHUNK = 100;
/**
 * Runs from this patch on start the missing schedulers with the client, in one activity, not as
 * children: the server records a child's start in its parent's history under the parent's lock, one
 * child after the other, and a fleet of 1 011 accounts took 90–240 s to start that way with the
 * server and the workers mostly idle (src/app/schedulerStarter.ts).
 */
const START_BY_CLIENT_PATCH = 'control-start-schedulers-by-client';

export async function pollingControl(args: PollingControlArgs): Promise<void> {
  // Reads of one row or one list: a minute is ample, and it bounds how long a control worker killed
  // mid-call holds the loop (with 30 minutes here, the fault suite saw a kill -9 stop every
  // reconcile, so a Redis flush was not rebuilt by it, for the rest of the run).
  const control = proxyActivities<ControlActivities>({
    taskQueue: args.taskQueues.control,
    startToCloseTimeout: '1 minute',
    retry: { initialInterval: '1 s', maximumInterval: '30 s', maximumAttempts: 10 },
  });
  // The rebuild of a Redis that lost its data takes minutes for millions of cards: it heartbeats,
  // and the heartbeat timeout hands it to another worker when its own dies.
  const { ensureRedisIntact } = proxyActivities<Pick<ControlActivities, 'ensureRedisIntact'>>({
    taskQueue: args.taskQueues.control,
    startToCloseTimeout: '30 minutes',
    heartbeatTimeout: REBUILD_HEARTBEAT_TIMEOUT_MS,
    retry: { initialInterval: '1 s', maximumInterval: '30 s', maximumAttempts: 10 },
  });
  // The one heartbeating activity gets a heartbeat timeout; the others do not heartbeat, so they must not have one.
  const { switchMode: switchModeActivity } = proxyActivities<Pick<ControlActivities, 'switchMode'>>({
    taskQueue: args.taskQueues.control,
    startToCloseTimeout: '30 minutes',
    heartbeatTimeout: args.switchHeartbeatTimeoutMs ?? SWITCH_HEARTBEAT_TIMEOUT_MS,
    retry: { initialInterval: '1 s', maximumInterval: '30 s', maximumAttempts: 10 },
  });
  const state = new ControlState(args);
  // Like the schedulers, this loop outlives any outage of what its activities need.
  const failures = loopFailures('pollingControl', 'singleton', state.failures);
  while (!state.modeKnown) {
    try {
      state.modeRead(await control.readMode());
    } catch (error) {
      failures.record('readMode', error);
      await sleep(state.readRetryMs());
    }
  }
  failures.succeeded('readMode');
  // Decided at the start of the run (after the mode read, where the marker has always been): a run
  // of the previous release keeps its 5 000-event rollover.
  state.useHistoryLimits(patched(SMALLER_HISTORY_PATCH));
  const startsMissingOnly = patched(START_MISSING_PATCH);
  const startsByClient = patched(START_BY_CLIENT_PATCH);
  // Starts of a whole fleet with the client (20 at a time) take seconds to a minute; a retry lists
  // again. It heartbeats, so a worker that dies mid-call holds the reconcile loop 30 s, not 5 minutes.
  const { startMissingSchedulers } = proxyActivities<Pick<ControlActivities, 'startMissingSchedulers'>>({
    taskQueue: args.taskQueues.control,
    startToCloseTimeout: '5 minutes',
    heartbeatTimeout: REBUILD_HEARTBEAT_TIMEOUT_MS,
    retry: { initialInterval: '1 s', maximumInterval: '30 s', maximumAttempts: 10 },
  });

  const switchMode = async (target: PollingMode): Promise<{ mode: PollingMode; changed: boolean }> => {
    // One switch at a time: a second request waits for the first to complete.
    await condition(() => state.switchFree);
    state.switchBegun();
    try {
      const result = await switchModeActivity({ mode: target, actor: 'pollingControl' });
      state.switched(target);
      return { mode: target, changed: result.changed };
    } finally {
      state.switchEnded();
    }
  };

  const startSchedulers = async (carrierIds: readonly string[]): Promise<void> => {
    await Promise.all(
      carrierIds.map(async (carrierId: string) => {
        try {
          await startChild(carrierScheduler, {
            workflowId: schedulerWorkflowId(carrierId, args.workflowIdPrefix),
            taskQueue: args.taskQueues.control,
            args: [state.schedulerArgs(carrierId)],
            parentClosePolicy: ParentClosePolicy.ABANDON,
            workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
            workflowTaskTimeout: LOOP_WORKFLOW_TASK_TIMEOUT_MS,
          });
        } catch (error) {
          // Already running is the normal case: schedulers outlive control's continue-as-new.
          if (!(error instanceof WorkflowExecutionAlreadyStartedError)) {
            log.warn('could not start carrierScheduler', { carrierId, error: String(error) });
          }
        }
      }),
    );
  };

  /** Starts a scheduler for every enabled account that has none running. Returns the enabled ids. */
  const reconcile = async (): Promise<string[]> => {
    // A Redis that lost its data (flushed, failed over to an empty replica) is rebuilt from PostgreSQL.
    if (await ensureRedisIntact()) log.warn('Redis had lost its data; rebuilt from PostgreSQL');
    if (startsByClient) return (await startMissingSchedulers(state.schedulerTemplate())).enabled;
    if (!startsMissingOnly) {
      const enabled = await control.listEnabledCarriers();
      await startSchedulers(enabled);
      return enabled;
    }
    const { enabled, toStart } = await control.listSchedulersToStart();
    // A chunk at a time, each started before the next: 1 011 starts in one workflow task (a fresh
    // fleet, bench accounts) timed that task out twice and left 43 schedulers unstarted for 3 minutes.
    for (let from = 0; from < toStart.length; from += SCHEDULER_START_CHUNK) await startSchedulers(toStart.slice(from, from + SCHEDULER_START_CHUNK));
    return enabled;
  };

  setHandler(setModeUpdate, switchMode, { validator: (target: PollingMode) => state.admitMode(target) });
  setHandler(setModeSignal, (target) => {
    if (!state.queueMode(target)) log.warn('dropping invalid setMode signal', { mode: String(target) });
  });
  setHandler(reconcileUpdate, async () => {
    const carriers = await reconcile();
    state.reconciled(carriers);
    return { carriers };
  });
  setHandler(reconcileSignal, () => state.requestReconcile());
  setHandler(controlStatusQuery, () => state.status());

  for (;;) {
    for (let target = state.nextQueuedMode(); target !== undefined; target = state.nextQueuedMode()) {
      try {
        await switchMode(target);
        state.queuedModeApplied();
        failures.succeeded('switchMode');
      } catch (error) {
        // Kept at the head of the queue: the switch is tried again after the backoff.
        failures.record('switchMode', error);
      }
    }
    if (state.takeReconcileRequest()) {
      try {
        state.reconciled(await reconcile());
        failures.succeeded('reconcile');
      } catch (error) {
        state.reconcileFailed();
        failures.record('reconcile', error);
      }
    }
    const { historyLength, historySize, continueAsNewSuggested } = workflowInfo();
    if (state.shouldContinueAsNew({ historyLength, historySize, continueAsNewSuggested, targetVersionChanged: targetVersionChanged() })) {
      await condition(allHandlersFinished);
      // The next run starts on the current worker-deployment version (src/workflows/versionUpgrade.ts).
      await continueAsNewToCurrentVersion<typeof pollingControl>(state.nextRunArgs());
    }
    const wait = state.wait();
    if (wait.kind === 'backoff') {
      await sleep(wait.ms);
      continue;
    }
    if (!(await condition(() => state.asked(), wait.ms))) state.waitedOut();
  }
}
