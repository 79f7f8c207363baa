/**
 * pollingControl's decisions (ControlState), without a workflow or a service: its history limits,
 * the queue of mode switches, when it reconciles, how it waits and backs off, what the next run
 * carries. test/workflows/pollingControl.test.ts runs the loop on the time-skipping server.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApplicationFailure } from '@temporalio/common';
import type { PollingMode } from '../../../src/workflow-safe/pollingMode.js';
import type { TaskQueueNames } from '../../../src/workflow-safe/taskQueues.js';
import {
  ControlState,
  DEFAULT_MAX_HISTORY_BYTES,
  DEFAULT_MAX_HISTORY_EVENTS,
  DEFAULT_RECONCILE_EVERY_MS,
  PREVIOUS_MAX_HISTORY_EVENTS,
  type ControlHistoryInfo,
  type PollingControlArgs,
} from '../../../src/workflows/control/controlState.js';

const QUEUES: TaskQueueNames = { control: 'ctl', card: 'card', gateway: 'gw', ingest: 'ing' };
const controlArgs = (extra: Partial<PollingControlArgs> = {}): PollingControlArgs => ({ taskQueues: QUEUES, ...extra });
const history = (extra: Partial<ControlHistoryInfo> = {}): ControlHistoryInfo => ({
  historyLength: 10,
  historySize: 1000,
  continueAsNewSuggested: false,
  targetVersionChanged: false,
  ...extra,
});

test('history limits: a patched run continues as new at 2 000 events or 2 MiB, an unpatched one at 5 000 events; args set the events only', () => {
  const patched = new ControlState(controlArgs());
  patched.useHistoryLimits(true);
  assert.equal(patched.shouldContinueAsNew(history({ historyLength: DEFAULT_MAX_HISTORY_EVENTS - 1 })), false);
  assert.equal(patched.shouldContinueAsNew(history({ historyLength: DEFAULT_MAX_HISTORY_EVENTS })), true);
  assert.equal(patched.shouldContinueAsNew(history({ historySize: DEFAULT_MAX_HISTORY_BYTES })), true);
  assert.equal(patched.shouldContinueAsNew(history({ continueAsNewSuggested: true })), true);
  assert.equal(patched.shouldContinueAsNew(history({ targetVersionChanged: true })), true);
  assert.deepEqual([DEFAULT_MAX_HISTORY_EVENTS, PREVIOUS_MAX_HISTORY_EVENTS], [2000, 5000]);

  const unpatched = new ControlState(controlArgs());
  unpatched.useHistoryLimits(false);
  assert.equal(unpatched.shouldContinueAsNew(history({ historyLength: 4999, historySize: 100 * 1024 * 1024 })), false);
  assert.equal(unpatched.shouldContinueAsNew(history({ historyLength: 5000 })), true);

  const given = new ControlState(controlArgs({ maxHistoryEvents: 50 }));
  given.useHistoryLimits(false);
  assert.equal(given.shouldContinueAsNew(history({ historyLength: 50 })), true);
  assert.equal(given.shouldContinueAsNew(history({ historyLength: 49, historySize: DEFAULT_MAX_HISTORY_BYTES })), false, 'no byte limit unpatched');
});

test('mode read: retried after 2, 4, 8 s (at least the 1 s base), the loop starts once it is known', () => {
  const state = new ControlState(controlArgs());
  assert.equal(state.modeKnown, false);
  assert.equal(state.readRetryMs(), 1000);
  const waits = [1, 2, 3].map(() => {
    state.failures.record('readMode', 'PostgreSQL away', 0);
    return state.readRetryMs();
  });
  assert.deepEqual(waits, [2000, 4000, 8000]);
  state.modeRead('legacy');
  assert.equal(state.modeKnown, true);
  assert.equal(state.status().mode, 'legacy');
});

test('mode switches: invalid ones refused (update) or dropped (signal); queued ones applied oldest first, a failed one kept at the head until its backoff ends', () => {
  const state = new ControlState(controlArgs({ queuedModes: ['legacy'] }));
  assert.throws(
    () => state.admitMode('paused' as PollingMode),
    (error: unknown) => error instanceof ApplicationFailure && error.type === 'invalid_mode' && error.nonRetryable,
  );
  assert.doesNotThrow(() => state.admitMode('carrier'));
  assert.equal(state.queueMode('paused' as PollingMode), false);
  assert.equal(state.queueMode('carrier'), true);
  assert.equal(state.nextQueuedMode(), 'legacy', 'the carried one first');
  // It failed: nothing is applied during the backoff, then the same one again.
  state.failures.record('switchMode', 'lock held', 0);
  assert.equal(state.nextQueuedMode(), undefined);
  state.failures.succeeded();
  assert.equal(state.nextQueuedMode(), 'legacy');
  state.queuedModeApplied();
  assert.equal(state.nextQueuedMode(), 'carrier');
  state.queuedModeApplied();
  assert.equal(state.nextQueuedMode(), undefined);
});

test('mode switches: one at a time; a switch asks for a reconcile and sets the mode', () => {
  const state = new ControlState(controlArgs());
  state.modeRead('carrier');
  assert.equal(state.takeReconcileRequest(), true, 'the first pass reconciles');
  assert.equal(state.switchFree, true);
  state.switchBegun();
  assert.deepEqual([state.switchFree, state.status().switching], [false, true]);
  state.switched('legacy');
  state.switchEnded();
  assert.deepEqual([state.switchFree, state.status().mode], [true, 'legacy']);
  assert.equal(state.takeReconcileRequest(), true, 'the switch asked for a reconcile');
  assert.equal(state.takeReconcileRequest(), false, 'taken once');
});

test('reconcile: when asked (signal), after a failure (asked again), and when the wait runs out unasked; the found accounts are reported', () => {
  const state = new ControlState(controlArgs());
  assert.equal(state.takeReconcileRequest(), true);
  state.reconcileFailed();
  assert.equal(state.asked(), true, 'a failed reconcile is asked again');
  assert.equal(state.takeReconcileRequest(), true);
  state.reconciled(['7', '8']);
  assert.deepEqual(state.status().carriers, ['7', '8']);
  assert.equal(state.asked(), false);
  state.requestReconcile();
  assert.equal(state.asked(), true);
  assert.equal(state.takeReconcileRequest(), true);
  state.waitedOut();
  assert.equal(state.takeReconcileRequest(), true);
  // A queued mode switch ends the wait too.
  state.queueMode('legacy');
  assert.equal(state.asked(), true);
});

test('wait: until asked, at most the reconcile period; while failing, the backoff (1 s base: 2, 4, … 30 s)', () => {
  const state = new ControlState(controlArgs());
  assert.deepEqual(state.wait(), { kind: 'untilAsked', ms: DEFAULT_RECONCILE_EVERY_MS });
  assert.equal(DEFAULT_RECONCILE_EVERY_MS, 60_000);
  assert.deepEqual(new ControlState(controlArgs({ reconcileEveryMs: 5000 })).wait(), { kind: 'untilAsked', ms: 5000 });
  const waits = [1, 2, 3, 4, 5, 6].map(() => {
    state.failures.record('reconcile', 'Redis away', 0);
    return state.wait();
  });
  assert.deepEqual(
    waits.map((w) => `${w.kind}:${w.ms}`),
    ['backoff:2000', 'backoff:4000', 'backoff:8000', 'backoff:16000', 'backoff:30000', 'backoff:30000'],
  );
  state.failures.succeeded();
  assert.equal(state.wait().kind, 'untilAsked');
});

test('schedulers and the next run: every scheduler gets the account, queues, prefix and scheduler options; the next run carries the unapplied switches', () => {
  const args = controlArgs({ workflowIdPrefix: 'p-', scheduler: { tickMs: 200, maxHistoryEvents: 40 }, reconcileEveryMs: 5000 });
  const state = new ControlState(args);
  assert.deepEqual(state.schedulerArgs('7'), { carrierId: '7', taskQueues: QUEUES, workflowIdPrefix: 'p-', tickMs: 200, maxHistoryEvents: 40 });
  assert.deepEqual(new ControlState(controlArgs()).schedulerArgs('8'), { carrierId: '8', taskQueues: QUEUES, workflowIdPrefix: '' });
  state.queueMode('legacy');
  state.queueMode('carrier');
  state.queuedModeApplied();
  assert.deepEqual(state.nextRunArgs(), { ...args, queuedModes: ['carrier'] });
});

test('status: mode carrier until read, no failure until one happens', () => {
  const state = new ControlState(controlArgs());
  assert.deepEqual(state.status(), { mode: 'carrier', carriers: [], switching: false });
  state.failures.record('reconcile', 'Redis away', 0);
  assert.equal(state.status().lastFailure?.activity, 'reconcile');
});
