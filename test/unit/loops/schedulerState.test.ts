/**
 * carrierScheduler's decisions (SchedulerState), without a workflow or a service: what each claim
 * round asks for and starts, the status it reports, the signal queue's batches and cap, when the
 * loop wakes and how long it waits, and when it drains and continues as new. The workflow tests
 * (test/workflows/carrierScheduler.test.ts) run the same decisions on the time-skipping server.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApplicationFailure } from '@temporalio/common';
import { SCHEDULER_CONTINUING_AS_NEW } from '../../../src/workflow-safe/requestCheck.js';
import { RequestCheckInvalid } from '../../../src/workflow-safe/requestCheckValidation.js';
import { lookahead, type Launch, type RoundOutcome } from '../../../src/workflows/scheduler/schedulerState.js';
import {
  CHILD_DRAIN_HARD_MAX_MS,
  CHILD_DRAIN_MAX_MS,
  CHILD_DRAIN_QUIET_MS,
  DEFAULT_MAX_HISTORY_BYTES,
  DEFAULT_MAX_HISTORY_EVENTS,
  MAX_QUEUED_SIGNALS,
  PREVIOUS_MAX_HISTORY_EVENTS,
  schedulerSettings,
} from '../../../src/workflows/scheduler/schedulerSettings.js';
import { CURRENT, RUN, UNPATCHED, card, claimed, history, newState, request, schedulerArgs } from './schedulerFixtures.js';

const T0 = 1_000_000;

const launches = (outcome: RoundOutcome): readonly Launch[] => {
  assert.equal(outcome.kind, 'goOn');
  return outcome.kind === 'goOn' ? outcome.launches : [];
};

test('settings: a patched run continues as new at 2 000 events or 2 MiB, an unpatched one at 8 000 events only; args override; at least one signal per batch', () => {
  assert.deepEqual(schedulerSettings(schedulerArgs(), CURRENT), {
    ...CURRENT,
    tickMs: 1000,
    maxHistoryEvents: DEFAULT_MAX_HISTORY_EVENTS,
    maxHistoryBytes: DEFAULT_MAX_HISTORY_BYTES,
    maxSignalsPerTick: 100,
  });
  assert.deepEqual([DEFAULT_MAX_HISTORY_EVENTS, DEFAULT_MAX_HISTORY_BYTES], [2000, 2 * 1024 * 1024]);
  const unpatched = schedulerSettings(schedulerArgs(), UNPATCHED);
  assert.deepEqual([unpatched.maxHistoryEvents, unpatched.maxHistoryBytes], [PREVIOUS_MAX_HISTORY_EVENTS, Number.POSITIVE_INFINITY]);
  assert.equal(PREVIOUS_MAX_HISTORY_EVENTS, 8000);
  const given = schedulerSettings(schedulerArgs({ tickMs: 250, maxHistoryEvents: 40, maxHistoryBytes: 1000, maxSignalsPerTick: 0 }), UNPATCHED);
  assert.deepEqual([given.tickMs, given.maxHistoryEvents, given.maxHistoryBytes, given.maxSignalsPerTick], [250, 40, 1000, 1]);
});

test('claim round: token prefix <runId>.<round> counting on from the carried rounds; the first round plans for one tick, later ones for the time since the last', () => {
  const state = newState({ rounds: 41, tickMs: 1000 });
  const first = state.beginRound(T0);
  assert.deepEqual(first, {
    carrierId: '7',
    tokenPrefix: 'run1.42',
    refreshConfig: true,
    sinceLastRoundMs: 1000,
    roundAt: T0,
    cardRuns: { taskQueues: schedulerArgs().taskQueues, workflowIdPrefix: '', claimedBy: `${RUN.workflowId}/${RUN.runId}` },
  });
  state.claimSucceeded();
  state.endRound(claimed([]));
  const second = state.beginRound(T0 + 2600);
  assert.equal(second.tokenPrefix, 'run1.43');
  assert.equal(second.sinceLastRoundMs, 2600, 'a late round plans for the time that passed');
});

test('claim round: the account is re-read on the first round, after configChanged, and until a claim succeeds', () => {
  const state = newState();
  assert.equal(state.beginRound(T0).refreshConfig, true);
  // The claim failed: the next round still asks for a fresh read.
  state.endRound(undefined);
  assert.equal(state.beginRound(T0 + 1000).refreshConfig, true);
  state.claimSucceeded();
  state.endRound(claimed([]));
  assert.equal(state.beginRound(T0 + 2000).refreshConfig, false);
  state.claimSucceeded();
  state.endRound(claimed([]));
  state.configChanged();
  assert.equal(state.beginRound(T0 + 3000).refreshConfig, true);
});

test('claim round: the adaptive limit and lookahead are sent once a round has fed the in-flight control, and carried over continue-as-new', () => {
  const state = newState({ tickMs: 1000 });
  const before = state.beginRound(T0);
  assert.equal('adaptiveLimit' in before || 'lookaheadMs' in before, false, 'none before the first claimed round');
  state.endRound(claimed([card('1')], { engine: { starts: 4, lagSumMs: 4 * 300 } }));
  const next = state.beginRound(T0 + 1000);
  const carried = state.nextRunArgs(schedulerArgs()).inflightControl;
  assert.ok(carried, 'the in-flight state travels to the next run');
  assert.equal(next.adaptiveLimit, carried.limit);
  assert.equal(next.lookaheadMs, Math.round(carried.startLagMs + 500), 'the start lag plus half a tick');
  assert.equal(lookahead({ ...carried, startLagMs: 120.4 }, 1000), 620);
  // A run that starts with the carried state sends it from its first round.
  const resumed = newState({ inflightControl: carried });
  assert.equal(resumed.beginRound(T0).adaptiveLimit, carried.limit);
});

test('claim round: the rate and whether the engine held the last round back are sent for the engine share; a fair rate well below the rate cuts the limit', () => {
  const state = newState({ tickMs: 1000 });
  assert.equal('engineShare' in state.beginRound(T0), false, 'none before the first claimed round');
  // Held back by its limit while runs start promptly (a ramp on an idle engine): not wanting.
  state.endRound(claimed([card('1')], { engine: { starts: 20, lagSumMs: 20 * 100 }, limitedBy: 'orchestration' }));
  const ramp = state.beginRound(T0 + 1000);
  assert.equal(ramp.engineShare?.wanting, false);
  assert.ok((ramp.engineShare?.startsPerSec ?? 0) > 0);
  // Held back while its runs queue (2 s against the 0.1 s seen): wanting.
  state.endRound(claimed([card('1')], { engine: { starts: 20, lagSumMs: 20 * 2000 }, limitedBy: 'orchestration' }));
  const next = state.beginRound(T0 + 2000);
  assert.equal(next.engineShare?.wanting, true);
  const limit = next.adaptiveLimit ?? 0;
  // Far above its fair rate: cut (by ×0.7 at most), not grown.
  state.endRound(claimed([], { engine: { starts: 20, lagSumMs: 20 * 2000 }, limitedBy: 'orchestration', fairRatePerSec: 0.5 }));
  const cut = state.beginRound(T0 + 3000);
  assert.ok((cut.adaptiveLimit ?? 0) < limit, `${String(cut.adaptiveLimit)} < ${limit}`);
  assert.equal(state.view().orchestration?.fairRatePerSec, 0.5);
  // Held back by its budget for a few rounds after one the engine held back: still wanting, then content.
  const wanting: boolean[] = [];
  for (let i = 0; i < 6; i += 1) {
    state.endRound(claimed([], { limitedBy: 'budget' }));
    wanting.push(state.beginRound(T0 + 4000 + i * 1000).engineShare?.wanting ?? false);
  }
  assert.deepEqual(wanting, [true, true, true, true, false, false]);
});

test('round outcome: one cardCheck per claimed card in claim order, at the round’s instant with its due horizon; none when the claim started them', () => {
  const state = newState();
  const input = state.beginRound(T0);
  const cards = [card('11'), card('12', true), card('13')];
  assert.deepEqual(launches(state.endRound(claimed(cards, { dueHorizonMs: 400 }))), [
    { kind: 'card', card: cards[0], claimedAt: input.roundAt, dueHorizonMs: 400 },
    { kind: 'card', card: cards[1], claimedAt: input.roundAt, dueHorizonMs: 400 },
    { kind: 'card', card: cards[2], claimedAt: input.roundAt, dueHorizonMs: 400 },
  ]);
  state.beginRound(T0 + 1000);
  assert.deepEqual(launches(state.endRound(claimed(cards, { startedByClaim: true }))), [], 'client start mode: the claim started them');
  const next = state.beginRound(T0 + 2000);
  assert.deepEqual(
    launches(state.endRound(claimed(cards, { priorityStartedByClaim: true }))),
    [
      { kind: 'card', card: cards[0], claimedAt: next.roundAt, dueHorizonMs: 0 },
      { kind: 'card', card: cards[2], claimedAt: next.roundAt, dueHorizonMs: 0 },
    ],
    'child start mode: the claim started the priority card, the scheduler the others',
  );
});

test('round outcome (batch shape): priority batches first, each lane in claim order, at most batchSize cards, ids naming the round', () => {
  const state = newState();
  state.beginRound(T0);
  const cards = [card('1'), card('2', true), card('3'), card('4'), card('5', true)];
  const runs = launches(state.endRound(claimed(cards, { runShape: 'batch', batchSize: 2 })));
  assert.deepEqual(
    runs.map((run) =>
      run.kind === 'batch' ? { tokenPrefix: run.tokenPrefix, fromPriority: run.batch.fromPriority, cards: run.batch.cards.map((c) => c.cardId) } : run,
    ),
    [
      { tokenPrefix: 'run1.1', fromPriority: true, cards: ['2', '5'] },
      { tokenPrefix: 'run1.1', fromPriority: false, cards: ['1', '3'] },
      { tokenPrefix: 'run1.1', fromPriority: false, cards: ['4'] },
    ],
  );
});

test('round outcome: a failed claim reports degraded, an idle one idle, a stop ends the loop with its reason; a claimed round reports claiming', () => {
  const state = newState();
  state.beginRound(T0);
  assert.deepEqual(state.endRound(undefined), { kind: 'goOn', launches: [] });
  assert.deepEqual([state.view().mode, state.view().rounds, state.view().claimedLastTick], ['degraded', 1, 0]);
  state.beginRound(T0 + 1000);
  assert.deepEqual(state.endRound({ kind: 'idle', reason: 'legacy_mode' }), { kind: 'goOn', launches: [] });
  assert.equal(state.view().mode, 'idle');
  state.beginRound(T0 + 2000);
  state.endRound(claimed([card('1'), card('2')], { expired: 3, running: 9, lanes: { priority: 1, normal: 4 } }));
  const view = state.view();
  assert.deepEqual(
    [view.mode, view.rounds, view.claimedLastTick, view.running, view.expiredLeases, view.lanes],
    ['claiming', 3, 2, 9, 3, { priority: 1, normal: 4 }],
  );
  state.beginRound(T0 + 3000);
  assert.deepEqual(state.endRound({ kind: 'stop', reason: 'carrier_disabled' }), { kind: 'stop', reason: 'carrier_disabled' });
});

test('a start refused while the card’s previous run is open: released due in 0.5 s, doubled at each refusal in a row up to 15 s, back to 0.5 s after a start; other failures wait 15 s', () => {
  const starts = newState().starts;
  const refuse = (id: string, previousRunOpen = true): number | undefined => {
    starts.starting();
    starts.startFailed([card(id)], previousRunOpen);
    const [release] = starts.takeReleases();
    assert.equal(release?.cardId, id);
    return release?.retryAfterMs;
  };
  assert.deepEqual(
    Array.from({ length: 7 }, () => refuse('1')),
    [500, 1000, 2000, 4000, 8000, 15_000, 15_000],
  );
  assert.equal(refuse('2'), 500, 'counted per card');
  starts.starting();
  starts.started([card('1')]);
  assert.equal(refuse('1'), 500, 'a run started in between: the count starts over');
  assert.equal(refuse('3', false), undefined, 'any other failure: the release’s default (FAILED_START_RETRY_MS)');
  assert.equal(starts.failures, 10);
});

test('a child start still under way a quarter of the lease after its claim: the next round holds its claim, then again each quarter lease; a start that answered is not held', () => {
  const state = newState();
  state.beginRound(T0);
  // The claim reports the account's lease (claimedRound: 20 s); a quarter of it is 5 s.
  const outcome = state.endRound(claimed([card('1'), card('2'), card('3')]));
  assert.equal(launches(outcome).length, 3);
  for (const id of ['1', '2', '3']) state.starts.starting([card(id)], T0);
  state.starts.started([card('2')]);
  state.starts.startFailed([card('3')]);
  assert.equal(state.beginRound(T0 + 4_999).holdClaims, undefined, 'not yet: under a quarter lease');
  state.endRound(claimed([]));
  assert.deepEqual(state.beginRound(T0 + 5_000).holdClaims, [card('1')], 'held: started or failed starts are not');
  state.endRound(claimed([]));
  assert.equal(state.beginRound(T0 + 9_000).holdClaims, undefined, 'held at T0 + 5 s: the next hold a quarter lease later');
  state.endRound(claimed([]));
  assert.deepEqual(state.beginRound(T0 + 10_000).holdClaims, [card('1')]);
  state.endRound(claimed([]));
  state.starts.started([card('1')]);
  assert.equal(state.beginRound(T0 + 20_000).holdClaims, undefined, 'started: nothing left to hold');
});

test('status: expired leases and start failures add up across rounds and runs (carried counters, refused by the claim, failed child starts)', () => {
  const state = newState({ counters: { expiredLeases: 5, startFailures: 2 } });
  state.beginRound(T0);
  state.endRound(claimed([], { expired: 1, startFailures: 1 }));
  assert.deepEqual([state.view().expiredLeases, state.view().startFailures], [6, 3]);
  // A child start failed: counted (the status shows it from the next claimed round), and its claim is to be released.
  state.starts.starting();
  state.starts.startFailed([card('9')]);
  assert.deepEqual(state.starts.takeReleases(), [card('9')]);
  assert.deepEqual(state.starts.takeReleases(), [], 'taken once');
  state.beginRound(T0 + 1000);
  state.endRound(claimed([], { expired: 2 }));
  assert.deepEqual([state.view().expiredLeases, state.view().startFailures], [8, 4]);
  assert.deepEqual(state.nextRunArgs(schedulerArgs()).counters, { expiredLeases: 8, startFailures: 4 });
});

test('status: paused is live (not the last round’s) and the last failure is reported', () => {
  const state = newState();
  state.pause();
  assert.equal(state.view().paused, true);
  state.resume();
  assert.equal(state.view().paused, false);
  state.failures.record('claimRound', 'Redis away', T0);
  assert.deepEqual(state.view().lastFailure, { activity: 'claimRound', message: 'Redis away', at: new Date(T0).toISOString(), consecutive: 1 });
});

test('priority retry sweep: every 5th round, never while paused', () => {
  const state = newState();
  const due: number[] = [];
  for (let round = 1; round <= 12; round += 1) {
    state.beginRound(T0 + round * 1000);
    state.endRound(claimed([]));
    if (state.priorityRetryDue()) due.push(round);
  }
  assert.deepEqual(due, [5, 10]);
  const paused = newState({ rounds: 4, paused: true });
  assert.equal(paused.isPaused, true);
  assert.equal(paused.priorityRetryDue(), false, 'round 4, paused');
  paused.resume();
  paused.beginRound(T0);
  assert.equal(paused.priorityRetryDue(), true, 'round 5 once resumed');
  paused.pause();
  assert.equal(paused.priorityRetryDue(), false, 'paused on a 5th round');
});

test('signals (claim-first runs): batches take retries first, then new signals, at most maxSignalsPerTick; one batch at a time', () => {
  const state = newState({ maxSignalsPerTick: 3 });
  for (const id of ['1', '2', '3', '4', '5', '6']) state.queueSignal(request(id));
  const first = state.nextSignalBatch();
  assert.deepEqual(
    first?.map((r) => r.cardId),
    ['1', '2', '3'],
  );
  assert.equal(state.nextSignalBatch(), undefined, 'none while one is under way');
  // Card 2's request failed: requeued ahead of the signals still waiting.
  state.signals.requeue([request('2')]);
  state.signals.batchDone();
  assert.deepEqual(
    state.nextSignalBatch()?.map((r) => r.cardId),
    ['2', '4', '5'],
  );
  state.signals.batchDone();
  assert.deepEqual(
    state.nextSignalBatch()?.map((r) => r.cardId),
    ['6'],
  );
  state.signals.batchDone();
  assert.equal(state.nextSignalBatch(), undefined, 'nothing queued');
  // More retries than a batch takes: the batch's own failures go back ahead of the retries left (they are older).
  state.signals.requeue([request('6'), request('7'), request('8'), request('9')]);
  assert.deepEqual(
    state.nextSignalBatch()?.map((r) => r.cardId),
    ['6', '7', '8'],
  );
  state.signals.requeue([request('7')]);
  state.signals.batchDone();
  assert.deepEqual(
    state.signals.carried().map((r) => r.cardId),
    ['7', '9'],
  );
});

test('signals: invalid ones are refused (the workflow logs and drops them), valid ones queued', () => {
  const state = newState();
  assert.throws(() => state.queueSignal({ cardId: 'abc', types: ['card_status'] }), RequestCheckInvalid);
  assert.throws(() => state.queueSignal({ cardId: '1', types: [] }), RequestCheckInvalid);
  assert.equal(state.signals.hasNew, false);
  state.queueSignal(request('1'));
  assert.equal(state.signals.hasNew, true);
});

test('signals: the queue holds at most MAX_QUEUED_SIGNALS, retries included; one beyond is refused, a batch taken makes room', () => {
  const state = newState({ maxSignalsPerTick: 10 });
  for (let i = 0; i < MAX_QUEUED_SIGNALS; i += 1) assert.equal(state.queueSignal(request(String(i + 1))), true);
  assert.equal(state.queueSignal(request('5000')), false, 'full: refused');
  assert.equal(state.signals.carried().length, MAX_QUEUED_SIGNALS, 'the continue-as-new input is bounded too');
  const batch = state.signals.takeBatch() ?? [];
  assert.equal(batch.length, 10);
  assert.equal(state.queueSignal(request('5001')), true, 'a batch taken makes room');
  // The batch failed: its requests come back as retries, and count again.
  state.signals.requeue(batch.slice(0, 9));
  state.signals.batchDone();
  assert.equal(state.signals.size, MAX_QUEUED_SIGNALS);
  assert.equal(state.queueSignal(request('5002')), false);
});

test('signals (runs before the claim-first patch): all of them at once, retries first, whatever the cap', () => {
  const state = newState({ maxSignalsPerTick: 1 }, UNPATCHED);
  for (const id of ['1', '2', '3']) state.queueSignal(request(id));
  state.signals.requeue([request('9')]);
  assert.deepEqual(
    state.signals.takeAll().map((r) => r.cardId),
    ['9', '1', '2', '3'],
  );
  assert.deepEqual(state.signals.takeAll(), []);
});

test('wake: a served request that put a card in the priority lane wakes the loop (updates always, signals in claim-first runs only); nothing requested does not', () => {
  const current = newState();
  current.requestServed({ status: 'cooldown', requested: 0 }, 'update');
  assert.equal(current.wakeEarly, false);
  current.requestServed({ status: 'requested', requested: 1 }, 'signal');
  assert.equal(current.wakeEarly, true);
  current.tickEnded();
  assert.equal(current.wakeEarly, false, 'reset at the end of the tick');
  current.requestServed({ status: 'requested', requested: 2 }, 'update');
  assert.equal(current.wakeEarly, true);

  const unpatched = newState({}, UNPATCHED);
  unpatched.requestServed({ status: 'requested', requested: 1 }, 'signal');
  assert.equal(unpatched.wakeEarly, false, 'its signals ran before the claim of the same tick');
  unpatched.requestServed({ status: 'requested', requested: 1 }, 'update');
  assert.equal(unpatched.wakeEarly, true);
});

test('wake: a request-check its caller served (priorityRequested update) wakes the loop, once; a closing run refuses it', () => {
  const state = newState({ tickMs: 1000 });
  assert.equal(state.wakeEarly, false);
  state.admitWake();
  state.requestedElsewhere();
  assert.equal(state.wakeEarly, true);
  state.tickEnded();
  assert.equal(state.wakeEarly, false);
  state.close();
  assert.throws(
    () => state.admitWake(),
    (error: unknown) => error instanceof ApplicationFailure && error.type === SCHEDULER_CONTINUING_AS_NEW,
  );
});

test('wait: the rest of the tick (at least 1 ms); while failing, the backoff, which a new signal does not cut short', () => {
  const state = newState({ tickMs: 1000 });
  assert.equal(state.waitMs(T0 + 300, T0), 700);
  assert.equal(state.waitMs(T0 + 5000, T0), 1, 'a tick that overran waits 1 ms');
  state.queueSignal(request('1'));
  assert.equal(state.signalToTake(), true, 'a new signal is taken up beside the loop');
  state.failures.record('claimRound', 'Redis away', T0);
  assert.equal(state.waitMs(T0 + 300, T0), 2000);
  assert.equal(state.signalToTake(), false, 'not while backing off');
  state.failures.record('claimRound', 'Redis away', T0);
  assert.equal(state.waitMs(T0 + 300, T0), 4000);
  state.failures.succeeded();
  assert.equal(state.waitMs(T0 + 300, T0), 700);
  // Not while a batch is under way either.
  state.nextSignalBatch();
  state.queueSignal(request('2'));
  assert.equal(state.signalToTake(), false);

  const unpatched = newState({}, UNPATCHED);
  assert.equal(unpatched.legacyWake(), false);
  unpatched.queueSignal(request('1'));
  assert.equal(unpatched.legacyWake(), true, 'a new signal ends the wait');
  unpatched.failures.record('claimRound', 'Redis away', T0);
  assert.equal(unpatched.legacyWake(), false, 'not during a backoff');
  unpatched.requestServed({ status: 'requested', requested: 1 }, 'update');
  assert.equal(unpatched.legacyWake(), true, 'an update that requested something does');
});

test('wait (idle): after a round that found nothing, until the next due the claim reported; a tick while anything of the loop is under way; woken by wake, configChanged and served requests', () => {
  const idle = (state: ReturnType<typeof newState>, at: number, idleMs: number | undefined): void => {
    state.beginRound(at);
    state.endRound(claimed([], { running: 0, ...(idleMs === undefined ? {} : { idleMs }) }));
  };
  const state = newState({ tickMs: 1000 });
  idle(state, T0, 45_000);
  assert.equal(state.waitMs(T0 + 300, T0), 44_700, 'the rest of the idle time, counted from the round');
  assert.equal(state.priorityRetryDue(), true, 'an idle round sweeps the priority retries (the next round may be a minute away)');
  idle(state, T0, 500);
  assert.equal(state.waitMs(T0 + 300, T0), 700, 'never shorter than the tick');
  idle(state, T0, undefined);
  assert.equal(state.waitMs(T0 + 300, T0), 700, 'a busy round: the tick');
  state.beginRound(T0);
  state.endRound(undefined);
  assert.equal(state.waitMs(T0 + 300, T0), 700, 'a failed round: the tick (or the backoff)');

  // Anything under way keeps the tick: a queued signal, a child start, a claim to give back, the drain, a pause.
  const queued = newState({ tickMs: 1000 });
  queued.queueSignal(request('1'));
  idle(queued, T0, 45_000);
  assert.equal(queued.waitMs(T0 + 300, T0), 700, 'a queued signal');
  const starting = newState({ tickMs: 1000 });
  starting.starts.starting([card('1')], T0);
  idle(starting, T0, 45_000);
  assert.equal(starting.waitMs(T0 + 300, T0), 700, 'a child start under way');
  starting.starts.startFailed([card('1')]);
  assert.equal(starting.waitMs(T0 + 300, T0), 700, 'a claim to give back');
  starting.starts.takeReleases();
  assert.equal(starting.waitMs(T0 + 300, T0), 44_700, 'nothing left under way');
  const draining = newState({ tickMs: 1000 });
  idle(draining, T0, 45_000);
  draining.observeHistory(history({ continueAsNewSuggested: true }), T0);
  assert.equal(draining.waitMs(T0 + 300, T0), 700, 'draining');

  // configChanged wakes a sleeping loop only: a ticking one claims at its next tick, as runs recorded before the idle sleep did.
  const ticking = newState({ tickMs: 1000 });
  idle(ticking, T0, undefined);
  ticking.configChanged();
  assert.equal(ticking.wakeEarly, false, 'configChanged does not cut a tick short');

  // What ends the sleep early.
  for (const [what, poke] of [
    ['wake', (s: ReturnType<typeof newState>) => s.wakeUp()],
    ['configChanged', (s: ReturnType<typeof newState>) => s.configChanged()],
    ['a served update', (s: ReturnType<typeof newState>) => s.requestServed({ status: 'requested', requested: 1 }, 'update')],
  ] as const) {
    const sleeping = newState({ tickMs: 1000 });
    idle(sleeping, T0, 45_000);
    assert.equal(sleeping.wakeEarly, false);
    poke(sleeping);
    assert.equal(sleeping.wakeEarly, true, what);
  }
});

test('drain: starts once the history reaches any limit (events, bytes, the server’s suggestion, a new version); rounds then ask the claim to start their runs', () => {
  const triggers = [
    history({ historyLength: 2000 }),
    history({ historySize: 2 * 1024 * 1024 }),
    history({ continueAsNewSuggested: true }),
    history({ targetVersionChanged: true }),
  ];
  for (const info of triggers) {
    const state = newState();
    state.observeHistory(history({ historyLength: 1999 }), T0);
    assert.equal(state.draining, false);
    assert.equal('startRuns' in state.beginRound(T0), false);
    state.observeHistory(info, T0);
    assert.equal(state.draining, true, JSON.stringify(info));
    assert.equal(state.beginRound(T0 + 1000).startRuns, true);
  }
  // An unpatched run ignores bytes and rolls over at 8 000 events.
  const unpatched = newState({}, UNPATCHED);
  unpatched.observeHistory(history({ historyLength: 7999, historySize: 50 * 1024 * 1024 }), T0);
  assert.equal(unpatched.draining, false);
  unpatched.observeHistory(history({ historyLength: 8000 }), T0);
  assert.equal(unpatched.draining, true);
});

test('continue-as-new past the 30 s drain: children still completing one after another are waited for until they go quiet for 5 s, at most 3 minutes; a run before the quiet-drain patch leaves them at 30 s', () => {
  // A card worker killed mid-run: its children finish on another worker one by one as their tasks
  // time out. Continuing as new while one completes makes the server refuse the task, and CI saw
  // every try refused, and every update with it, for minutes.
  const open = (patches = CURRENT): ReturnType<typeof newState> => {
    const state = newState({}, patches);
    for (let i = 0; i < 3; i += 1) {
      state.starts.starting();
      state.starts.started();
    }
    state.observeHistory(history({ historyLength: 2000 }), T0);
    return state;
  };
  const state = open();
  state.starts.closed(T0 + CHILD_DRAIN_MAX_MS - 1000);
  assert.equal(state.continueAsNewDecision(T0 + CHILD_DRAIN_MAX_MS), 'notYet', 'a completion 1 s ago');
  assert.equal(state.continueAsNewDecision(T0 + CHILD_DRAIN_MAX_MS - 1000 + CHILD_DRAIN_QUIET_MS - 1), 'notYet');
  assert.equal(state.continueAsNewDecision(T0 + CHILD_DRAIN_MAX_MS - 1000 + CHILD_DRAIN_QUIET_MS), 'nowLeavingChildren', '5 s quiet');
  state.starts.closed(T0 + CHILD_DRAIN_HARD_MAX_MS - 1);
  assert.equal(state.continueAsNewDecision(T0 + CHILD_DRAIN_HARD_MAX_MS - 1), 'notYet', 'still completing');
  assert.equal(state.continueAsNewDecision(T0 + CHILD_DRAIN_HARD_MAX_MS), 'nowLeavingChildren', 'the hard bound');
  assert.deepEqual([CHILD_DRAIN_QUIET_MS, CHILD_DRAIN_HARD_MAX_MS], [5_000, 180_000]);
  // None completed in this run: quiet from the start.
  assert.equal(open().continueAsNewDecision(T0 + CHILD_DRAIN_MAX_MS), 'nowLeavingChildren');
  // Every child completed: at once, however recent the last completion.
  const drained = open();
  for (let i = 0; i < 3; i += 1) drained.starts.closed(T0 + 100);
  assert.equal(drained.continueAsNewDecision(T0 + 100), 'now');
  // A run started before the patch keeps its rule to its end.
  const before = open({ ...CURRENT, drainsUntilQuiet: false });
  before.starts.closed(T0 + CHILD_DRAIN_MAX_MS - 1);
  assert.equal(before.continueAsNewDecision(T0 + CHILD_DRAIN_MAX_MS), 'nowLeavingChildren');
});

test('continue-as-new: waits for the children to complete, at most 30 s from the drain’s start, and for the signal batch under way; no batch starts meanwhile', () => {
  const state = newState();
  state.starts.starting();
  state.starts.started();
  state.starts.starting();
  assert.equal(state.continueAsNewDecision(T0), 'notYet', 'not draining');
  state.observeHistory(history({ historyLength: 5000 }), T0);
  // A later observation does not move the drain's start.
  state.observeHistory(history({ historyLength: 5000 }), T0 + 10_000);
  assert.equal(state.continueAsNewDecision(T0 + 1000), 'notYet', 'one child open, one start under way');
  assert.equal(state.continueAsNewDecision(T0 + CHILD_DRAIN_MAX_MS - 1), 'notYet');
  assert.equal(state.continueAsNewDecision(T0 + CHILD_DRAIN_MAX_MS), 'nowLeavingChildren');
  assert.equal(CHILD_DRAIN_MAX_MS, 30_000);

  const drained = newState();
  drained.starts.starting();
  drained.starts.started();
  drained.queueSignal(request('1'));
  const batch = drained.nextSignalBatch();
  assert.ok(batch);
  drained.observeHistory(history({ continueAsNewSuggested: true }), T0);
  drained.starts.closed(T0);
  assert.equal(drained.starts.drained, true);
  assert.equal(drained.continueAsNewDecision(T0 + 60_000), 'notYet', 'the batch under way finishes first');
  drained.signals.batchDone();
  drained.queueSignal(request('2'));
  assert.equal(drained.nextSignalBatch(), undefined, 'a draining run starts no batch');
  assert.equal(drained.signalToTake(), false);
  assert.equal(drained.continueAsNewDecision(T0 + 1), 'now');
});

test('continue-as-new (runs before the drain patch): at once, children or not', () => {
  const state = newState({}, { drainsChildren: false, claimsFirst: true, drainsUntilQuiet: false });
  state.starts.starting();
  state.starts.started();
  state.observeHistory(history({ historyLength: 8000 }), T0);
  assert.equal(state.continueAsNewDecision(T0), 'now');
});

test('closing: updates are refused with the retry type from then on; invalid ones always', () => {
  const state = newState();
  assert.doesNotThrow(() => state.admitUpdate(request('1')));
  assert.throws(() => state.admitUpdate({ cardId: 'x', types: ['card_status'] }), RequestCheckInvalid);
  state.close();
  assert.equal(state.isClosing, true);
  assert.throws(
    () => state.admitUpdate(request('1')),
    (error: unknown) => error instanceof ApplicationFailure && error.type === SCHEDULER_CONTINUING_AS_NEW && error.nonRetryable,
  );
});

test('next run: carries paused, rounds, the queued signals (retries first, then new ones, none lost) and keeps the rest of the args', () => {
  const args = schedulerArgs({ maxHistoryEvents: 40, workflowIdPrefix: 'p-', pendingRequests: [request('1')] });
  const state = newState(args);
  state.queueSignal(request('2'));
  const batch = state.nextSignalBatch();
  assert.deepEqual(
    batch?.map((r) => r.cardId),
    ['1', '2'],
  );
  state.queueSignal(request('3'));
  state.signals.requeue([request('2')]);
  state.signals.batchDone();
  state.pause();
  state.beginRound(T0);
  const next = state.nextRunArgs(args);
  assert.deepEqual(next, {
    ...args,
    paused: true,
    rounds: 1,
    pendingRequests: [request('2'), request('3')],
    counters: { expiredLeases: 0, startFailures: 0 },
  });
});
