import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  MIN_INFLIGHT_LIMIT,
  QUEUE_DELAY_HIGH_MS,
  engineQueues,
  inflightLimitOf,
  initialInflightControl,
  limitingFactor,
  nextInflightControl,
  type InflightControlState,
  type LimitingFactor,
  type RoundObservation,
} from '../../src/workflow-safe/inflightControl.js';
import { fairEngineRate } from '../../src/workflow-safe/engineShare.js';

const round = (overrides: Partial<RoundObservation>): RoundObservation => ({
  starts: 10,
  lagSumMs: 10 * 50,
  elapsedMs: 1000,
  limitedBy: 'orchestration',
  maxLimit: 200,
  budgetQps: 20,
  leaseMs: 60_000,
  ...overrides,
});

test('starts small (slow start) at half the budget up to 10, bounded by the configured limit and the floor', () => {
  assert.equal(initialInflightControl(200, 20).limit, 10);
  assert.equal(initialInflightControl(8, 20).limit, 8);
  assert.equal(initialInflightControl(200, 6).limit, 3);
  assert.equal(initialInflightControl(200, 16).limit, 8);
  // Capped: a large account's first round must not hand the engine a backlog.
  assert.equal(initialInflightControl(200, 66).limit, 10);
  assert.equal(initialInflightControl(200, 0.5).limit, MIN_INFLIGHT_LIMIT);
});

test('the limit is a real number; a claim gets its whole part', () => {
  // A 4 QPS account grows by 0.4 a round: 2 → 2.4 → 2.8 → 3.2 (whole parts 2, 2, 2, 3).
  let state: InflightControlState = { ...initialInflightControl(200, 4), slowStart: false };
  const seen: number[] = [];
  for (let i = 0; i < 3; i += 1) {
    state = nextInflightControl(state, round({ budgetQps: 4 }));
    seen.push(inflightLimitOf(state));
  }
  assert.deepEqual(seen, [2, 2, 3]);
  assert.ok(Math.abs(state.limit - 3.2) < 1e-9, String(state.limit));
});

test('grows while the limit binds and executions start promptly: doubling first, then by a tenth of the budget', () => {
  let state = initialInflightControl(200, 20);
  state = nextInflightControl(state, round({}));
  assert.equal(state.limit, 20);
  state = nextInflightControl(state, round({}));
  assert.equal(state.limit, 40);
  // After a congestion cut, growth is additive.
  state = nextInflightControl(state, round({ lagSumMs: 10 * (QUEUE_DELAY_HIGH_MS + 500), budgetQps: 2 }));
  assert.equal(state.limit, 28);
  assert.equal(state.slowStart, false);
  state = nextInflightControl(state, round({}));
  assert.equal(state.limit, 30);
});

test('does not grow when the budget or nothing due holds the account back', () => {
  const start = initialInflightControl(200, 20);
  for (const limitedBy of ['budget', 'none'] satisfies LimitingFactor[]) assert.equal(nextInflightControl(start, round({ limitedBy })).limit, start.limit);
});

test('shrinks when executions start late, once per hold period, never below the floor, and records the capacity', () => {
  // Base lag learnt earlier at 50 ms: the queue delay is the lag above it.
  let state: InflightControlState = { ...initialInflightControl(200, 20), limit: 100, baseLagMs: 50 };
  const late = round({ starts: 30, lagSumMs: 30 * (QUEUE_DELAY_HIGH_MS + 1000), budgetQps: 1 });
  state = nextInflightControl(state, late);
  assert.equal(state.limit, 70);
  assert.equal(state.capacityPerSec, 30);
  state = nextInflightControl(state, late);
  assert.equal(state.limit, 70, 'held: the cut shows a round later');
  state = nextInflightControl(state, late);
  assert.equal(state.limit, 49);
  // Far behind: halved.
  state = nextInflightControl({ ...state, holdRounds: 0 }, round({ starts: 30, lagSumMs: 30 * (4 * QUEUE_DELAY_HIGH_MS + 1000), budgetQps: 1 }));
  assert.equal(state.limit, 24.5);
  assert.equal(inflightLimitOf(state), 24);
  for (let i = 0; i < 40; i += 1) state = nextInflightControl(state, late);
  assert.equal(state.limit, MIN_INFLIGHT_LIMIT);
});

test('follows a lowered configured limit', () => {
  const state = { ...initialInflightControl(200, 20), limit: 150 };
  assert.equal(nextInflightControl(state, round({ limitedBy: 'budget', maxLimit: 50 })).limit, 50);
});

test('limiting factor', () => {
  assert.equal(limitingFactor({ dueLeft: 0, running: 50, limit: 50, adaptiveLimit: 50, maxLimit: 100 }), 'none');
  assert.equal(limitingFactor({ dueLeft: 5, running: 50, limit: 50, adaptiveLimit: 50, maxLimit: 100 }), 'orchestration');
  assert.equal(limitingFactor({ dueLeft: 5, running: 100, limit: 100, adaptiveLimit: 120, maxLimit: 100 }), 'inflight');
  assert.equal(limitingFactor({ dueLeft: 5, running: 10, limit: 50, adaptiveLimit: 50, maxLimit: 100 }), 'budget');
});

/**
 * Two accounts with budgets 10 and 30 QPS sharing an engine that starts 40 executions/s; each
 * execution holds its slot ~1 s, and start lag grows with the in-flight total beyond what the
 * engine runs in a second. Both always have cards due. AIMD with a budget-scaled step must settle
 * near the engine's capacity, with shares that follow the budgets.
 */
test('accounts share a saturated engine weighted by budget, and the total stays near what it runs', () => {
  const capacity = 200;
  const budgets = [10, 30];
  let states = budgets.map((qps) => initialInflightControl(500, qps));
  const sums = [0, 0];
  let totalSum = 0;
  const rounds = 600;
  for (let r = 0; r < rounds; r += 1) {
    const total = states.reduce((sum, s) => sum + s.limit, 0);
    const lagMs = Math.max(0, total - capacity) * 100;
    const startRate = Math.min(1, capacity / total);
    states = states.map((state, i) =>
      nextInflightControl(state, {
        starts: Math.max(1, Math.round(state.limit * startRate)),
        lagSumMs: Math.max(1, Math.round(state.limit * startRate)) * lagMs,
        elapsedMs: 1000,
        limitedBy: 'orchestration',
        maxLimit: 500,
        budgetQps: budgets[i] ?? 1,
        leaseMs: 60_000,
      }),
    );
    if (r >= rounds / 2) {
      states.forEach((s, i) => (sums[i] = (sums[i] ?? 0) + s.limit));
      totalSum += states.reduce((sum, s) => sum + s.limit, 0);
    }
  }
  const share = (sums[1] ?? 0) / (sums[0] ?? 1);
  const meanTotal = totalSum / (rounds / 2);
  assert.ok(share > 2 && share < 4.5, `share ${share.toFixed(2)} (budgets 1:3)`);
  assert.ok(meanTotal > capacity * 0.7 && meanTotal < capacity * 1.3, `mean in-flight total ${meanTotal.toFixed(1)} vs engine ${capacity}`);
});

test('a constant start lag with no queue is learnt as the base and does not cut; a lag growing above it does', () => {
  // An idle dev server: every start takes ~1.8 s whatever the load.
  let state = initialInflightControl(200, 20);
  for (let i = 0; i < 5; i += 1) state = nextInflightControl(state, round({ starts: state.limit, lagSumMs: state.limit * 1800 }));
  assert.equal(state.baseLagMs, 1800);
  assert.equal(state.limit, 200, 'kept doubling: 1.8 s is no queue here');
  // Now a queue builds: 1.8 s + 2.5 s.
  state = nextInflightControl(state, round({ lagSumMs: 10 * 4300 }));
  assert.equal(state.limit, 140);
  // The base never excuses more than 2 s, however it was learnt.
  const slow = { ...initialInflightControl(200, 20), limit: 100, baseLagMs: 9000 };
  assert.equal(nextInflightControl(slow, round({ lagSumMs: 10 * 9000 })).limit, 70);
});

test('the base lag drifts up slowly so a lasting change is learnt, and follows any lower lag at once', () => {
  let state: InflightControlState = { ...initialInflightControl(200, 20), baseLagMs: 100 };
  state = nextInflightControl(state, round({ limitedBy: 'budget', lagSumMs: 10 * 1000 }));
  assert.equal(state.baseLagMs, 120);
  state = nextInflightControl(state, round({ limitedBy: 'budget', lagSumMs: 10 * 30 }));
  assert.equal(state.baseLagMs, 30);
  // A state from a run that kept no base (carried over by continue-as-new) learns one.
  const carried = { ...initialInflightControl(200, 20) } as Partial<InflightControlState>;
  delete (carried as { baseLagMs?: unknown }).baseLagMs;
  assert.equal(nextInflightControl(carried as InflightControlState, round({})).baseLagMs, 50);
});

test('a start lag beyond a quarter of the lease drops the limit at once to what the engine started, hold or not; halved only outside a hold', () => {
  const state: InflightControlState = { ...initialInflightControl(200, 20), limit: 120, baseLagMs: 50, holdRounds: 1 };
  const next = nextInflightControl(state, round({ starts: 14, lagSumMs: 14 * 16_000, leaseMs: 60_000 }));
  assert.equal(next.limit, 14);
  assert.equal(next.slowStart, false);
  // Never below the floor, and no lower than half the limit only when the engine started more than that.
  assert.equal(nextInflightControl(state, round({ starts: 1, lagSumMs: 20_000 })).limit, MIN_INFLIGHT_LIMIT);
  assert.equal(nextInflightControl({ ...state, limit: 20, holdRounds: 0 }, round({ starts: 18, lagSumMs: 18 * 20_000 })).limit, 10);
  assert.equal(
    nextInflightControl({ ...state, limit: 20 }, round({ starts: 18, lagSumMs: 18 * 20_000 })).limit,
    18,
    'in a hold: what the engine ran, not half',
  );
});

test('a backlog draining with its lag above the lease guard halves the limit once, then follows what the engine runs, not down to the floor', () => {
  // The bench's capacity accounts: 150 in flight, the engine running ~20 of them a round, the
  // runs starting 6-14 s late for several rounds after the first cut (a 20 s lease: guard at 5 s).
  let state: InflightControlState = { ...initialInflightControl(200, 5000), limit: 150, slowStart: false, startsPerSec: 20, baseLagMs: 100, lowestLagMs: 100 };
  const lags = [5500, 6400, 8000, 9000, 11_000, 12_000, 14_000];
  const limits: number[] = [];
  for (const lag of lags) {
    state = nextInflightControl(state, round({ budgetQps: 5000, starts: 20, lagSumMs: 20 * lag, leaseMs: 20_000 }));
    limits.push(state.limit);
  }
  assert.equal(limits[0], 20, 'the first cut: what the engine ran (below half of 150)');
  assert.ok(
    limits.every((limit) => limit >= 10),
    `halved at most once more per hold of the lag's length: ${limits.join(', ')}`,
  );
});

/**
 * Accounts of the given budgets share an engine that starts `capacity` executions a second, each
 * holding its slot ~1 s; the queue lag grows with the in-flight total beyond it. All always have
 * cards due (the engine is the limit). `roundOverheadMsPerStart`: the part of a run's start lag that
 * is its claimer's own round (0: none); `reportQueueLag`: the runs report the queue lag apart.
 * Returns each account's share of the executions over its budget share (the last 3/4 of the rounds).
 */
function simulatedShares(capacity: number, budgets: readonly number[], options: { roundOverheadMsPerStart?: number; reportQueueLag?: boolean } = {}): number[] {
  let states = budgets.map((qps) => initialInflightControl(500, qps));
  const executions = budgets.map(() => 0);
  const rounds = 1200;
  for (let r = 0; r < rounds; r += 1) {
    const limits = states.map(inflightLimitOf);
    const total = limits.reduce((sum, limit) => sum + limit, 0);
    const queueMs = (Math.max(0, total - capacity) * 1000) / capacity;
    const startRate = Math.min(1, capacity / total);
    states = states.map((state, i) => {
      const starts = (limits[i] ?? 0) * startRate;
      if (r >= rounds / 4) executions[i] = (executions[i] ?? 0) + starts;
      const roundOverheadMs = (options.roundOverheadMsPerStart ?? 0) * starts;
      return nextInflightControl(state, {
        starts,
        lagSumMs: starts * (queueMs + 50 + roundOverheadMs),
        ...(options.reportQueueLag === true ? { queueStarts: starts, queueLagSumMs: starts * (queueMs + 50) } : {}),
        elapsedMs: 1000,
        limitedBy: 'orchestration',
        maxLimit: 500,
        budgetQps: budgets[i] ?? 1,
        leaseMs: 60_000,
      });
    });
  }
  const allExecutions = executions.reduce((sum, n) => sum + n, 0);
  const allBudgets = budgets.reduce((sum, qps) => sum + qps, 0);
  return budgets.map((qps, i) => (executions[i] ?? 0) / allExecutions / (qps / allBudgets));
}

const shareText = (ratios: readonly number[]): string => ratios.map((r) => r.toFixed(2)).join(' / ');

/**
 * Three accounts of the overload bench (budgets 1 : 2 : 4). Issue 23's target: each account's share
 * of the executions within ±10 % of its budget share. With whole steps of at least one and a first
 * limit capped at 10 the small accounts got up to 1.8× theirs here (and 1.35× in the bench).
 */
test('accounts of budgets 1 : 2 : 4 share a saturated engine within ±10 % of their budget shares', () => {
  for (const [capacity, budgets] of [
    [23, [8, 17, 33]],
    [12, [4, 9, 17]],
    [60, [5, 10, 20]],
  ] as const) {
    const shares = simulatedShares(capacity, budgets);
    for (const ratio of shares)
      assert.ok(ratio > 0.9 && ratio < 1.1, `capacity ${capacity}, budgets ${budgets.join(':')}: ${shareText(shares)} of the budget shares`);
  }
});

/**
 * In client start mode a run's start lag also holds the claim activity's start calls, more for a
 * larger account's round (overload bench of 2026-12-06, client mode: start lag 1.51 / 1.69 / 1.87 s,
 * queue lag 1.34 / 1.48 / 1.56 s for budgets 1 : 2 : 4). The queue lag (run creation to first task)
 * is the same for all accounts on a queue: the controller follows it.
 */
test('a round overhead that grows with the account skews the shares on the start lag, not on the queue lag', () => {
  const onStartLag = simulatedShares(40, [10, 20, 40], { roundOverheadMsPerStart: 40 });
  assert.ok((onStartLag[2] ?? 1) < 0.9, `on the start lag: ${shareText(onStartLag)} of the budget shares`);
  const onQueueLag = simulatedShares(40, [10, 20, 40], { roundOverheadMsPerStart: 40, reportQueueLag: true });
  for (const ratio of onQueueLag) assert.ok(ratio > 0.9 && ratio < 1.1, `on the queue lag: ${shareText(onQueueLag)} of the budget shares`);
});

test('the queue lag drives the cut and the base; the start lag still guards the lease', () => {
  const state: InflightControlState = { ...initialInflightControl(200, 20), limit: 100, baseLagMs: 50 };
  // Start lag 3 s (the scheduler's round), queue lag 100 ms: no congestion, the limit grows.
  const prompt = nextInflightControl(state, round({ lagSumMs: 10 * 3000, queueStarts: 10, queueLagSumMs: 10 * 100 }));
  assert.ok(prompt.limit > 100, String(prompt.limit));
  assert.equal(prompt.baseLagMs, 70);
  assert.ok(prompt.queueLagMs !== undefined && prompt.startLagMs > prompt.queueLagMs);
  // Queue lag 3 s above the base: cut.
  assert.equal(nextInflightControl(state, round({ lagSumMs: 10 * 3100, queueStarts: 10, queueLagSumMs: 10 * 3100 })).limit, 70);
  // Start lag past a quarter of the lease: the lease guard, whatever the queue lag.
  assert.equal(nextInflightControl(state, round({ starts: 14, lagSumMs: 14 * 16_000, queueStarts: 14, queueLagSumMs: 14 * 100 })).limit, 14);
});

test('above its fair rate of a saturated engine the limit is cut to that proportion and holds; near it, it stops growing', () => {
  const state: InflightControlState = { ...initialInflightControl(200, 20), slowStart: false, limit: 40, startsPerSec: 20 };
  // 20/s against a fair 10/s: cut by the usual ×0.7 at most, then three rounds of hold.
  const cut = nextInflightControl(state, round({ starts: 20, lagSumMs: 20 * 50, fairRatePerSec: 10 }));
  assert.equal(cut.limit, 28);
  assert.equal(cut.holdRounds, 3);
  assert.equal(nextInflightControl(cut, round({ starts: 20, lagSumMs: 20 * 50, fairRatePerSec: 10 })).limit, 28, 'held');
  // 20/s against a fair 16/s: cut to the proportion 0.8.
  assert.ok(Math.abs(nextInflightControl(state, round({ starts: 20, lagSumMs: 20 * 50, fairRatePerSec: 16 })).limit - 32) < 1e-9);
  // 20/s against a fair 19.5/s (at most 5 % above it, not below it): neither cut nor grown.
  assert.equal(nextInflightControl(state, round({ starts: 20, lagSumMs: 20 * 50, fairRatePerSec: 19.5 })).limit, 40);
  // 20/s against a fair 18.5/s (8 % above it): cut.
  assert.ok(nextInflightControl(state, round({ starts: 20, lagSumMs: 20 * 50, fairRatePerSec: 18.5 })).limit < 40);
  // Well below its fair rate it grows by its step as before; without a fair rate too.
  assert.equal(nextInflightControl(state, round({ starts: 20, lagSumMs: 20 * 50, fairRatePerSec: 40 })).limit, 42);
  // Just below it, only to the limit that runs the fair rate at the current rate per slot (40 × 20.5/20).
  assert.ok(Math.abs(nextInflightControl(state, round({ starts: 20, lagSumMs: 20 * 50, fairRatePerSec: 20.5 })).limit - 41) < 1e-9);
  // A small account (budget 11 QPS, step 1.1 on a limit of 6) 2 % below its fair rate: a whole step
  // would put it 18 % above; it grows by 2 %.
  const small: InflightControlState = { ...initialInflightControl(200, 11), slowStart: false, limit: 6, startsPerSec: 4.9 };
  const grown = nextInflightControl(small, round({ starts: 4.9, lagSumMs: 4.9 * 50, budgetQps: 11, fairRatePerSec: 5 }));
  assert.ok(grown.limit > 6 && grown.limit <= (6 * 5) / grown.startsPerSec + 1e-9, `limit ${grown.limit}`);
  assert.equal(nextInflightControl(state, round({ starts: 20, lagSumMs: 20 * 50 })).limit, 42);
});

/**
 * Child start mode as the overload bench showed it: each account's runs start through its own
 * scheduler's history, and the engine works the schedulers in turn, so every account that asks for
 * more than an equal part gets an equal part (bench, budgets 1 : 2 : 4: 17.3 / 19.7 / 18.4 runs/s).
 * Each account's start lag is its own in-flight set over its own rate: an account the engine
 * favours sees a short lag and grows, whatever its budget.
 */
function childModeShares(capacity: number, budgets: readonly number[], fairShares: boolean): number[] {
  const cycleSec = 2.5;
  let states = budgets.map((qps) => initialInflightControl(500, qps));
  const executions = budgets.map(() => 0);
  const rounds = 1200;
  for (let r = 0; r < rounds; r += 1) {
    const limits = states.map(inflightLimitOf);
    // Round-robin water-filling: equal parts, an account asking less keeps what it asks.
    const rates = limits.map(() => 0);
    let left = capacity;
    let open = limits.map((_, i) => i);
    while (open.length > 0 && left > 1e-9) {
      const part = left / open.length;
      const asking = open.filter((i) => (limits[i] ?? 0) / cycleSec - (rates[i] ?? 0) > part);
      for (const i of open) {
        const give = Math.min(part, (limits[i] ?? 0) / cycleSec - (rates[i] ?? 0));
        rates[i] = (rates[i] ?? 0) + give;
        left -= give;
      }
      open = asking;
    }
    const entries = states.map((state, i) => ({
      carrierId: String(i),
      startsPerSec: state.startsPerSec,
      weight: budgets[i] ?? 1,
      // As the scheduler decides it: every account is held back here; wanting when its runs queue.
      wanting: engineQueues(state),
      at: r * 1000,
    }));
    states = states.map((state, i) => {
      const starts = rates[i] ?? 0;
      if (r >= rounds / 4) executions[i] = (executions[i] ?? 0) + starts;
      const lagMs = (1000 * (limits[i] ?? 0)) / Math.max(starts, 1e-9);
      return nextInflightControl(state, {
        starts,
        lagSumMs: starts * lagMs,
        elapsedMs: 1000,
        limitedBy: 'orchestration',
        maxLimit: 500,
        budgetQps: budgets[i] ?? 1,
        leaseMs: 60_000,
        fairRatePerSec: fairShares ? fairEngineRate(entries, String(i), r * 1000) : null,
      });
    });
  }
  const allExecutions = executions.reduce((sum, n) => sum + n, 0);
  const allBudgets = budgets.reduce((sum, qps) => sum + qps, 0);
  return budgets.map((qps, i) => (executions[i] ?? 0) / allExecutions / (qps / allBudgets));
}

test('child start mode: the accounts of budgets 1 : 2 : 4 share the engine within ±6 % of their budget shares once each knows its fair rate', (t) => {
  for (const [capacity, budgets] of [
    [55, [23, 46, 92]],
    [20, [4, 9, 17]],
  ] as const) {
    const unfair = childModeShares(capacity, budgets, false);
    assert.ok((unfair[0] ?? 0) > 1.5, `capacity ${capacity}, each on its own lag: ${shareText(unfair)} of the budget shares`);
    const shares = childModeShares(capacity, budgets, true);
    t.diagnostic(`capacity ${capacity}: ${shareText(unfair)} on their own lags, ${shareText(shares)} with fair rates`);
    for (const ratio of shares) assert.ok(ratio > 0.94 && ratio < 1.06, `capacity ${capacity}, with fair rates: ${shareText(shares)} of the budget shares`);
  }
});

/**
 * Accounts ramping up on an idle engine (the demo's first minute): each is held back by its own
 * adaptive limit (`orchestration`). Counted as wanting for that alone, each got a fair rate — the
 * accounts' summed rates split by budget — and growth bounded by it froze the sum where it stood
 * (20 rounds for the demo's accounts, never for 10 / 40 / 80). While their runs start promptly
 * they do not want more of the engine, and grow freely.
 */
function rampRounds(budgets: readonly number[], demandPerSec: readonly number[]): number {
  const executionSec = 0.8;
  let states = budgets.map((qps) => initialInflightControl(100, qps));
  for (let r = 1; r <= 120; r += 1) {
    const rates = states.map((state, i) => Math.min(inflightLimitOf(state) / executionSec, demandPerSec[i] ?? 0));
    if (rates.every((rate, i) => rate >= (demandPerSec[i] ?? 0))) return r;
    // Wanting, as the scheduler decides it: held back (below its demand) while its runs queue.
    const entries = states.map((state, i) => ({
      carrierId: String(i),
      startsPerSec: state.startsPerSec,
      weight: budgets[i] ?? 1,
      wanting: (rates[i] ?? 0) < (demandPerSec[i] ?? 0) && engineQueues(state),
      at: r * 1000,
    }));
    states = states.map((state, i) =>
      nextInflightControl(state, {
        starts: rates[i] ?? 0,
        lagSumMs: (rates[i] ?? 0) * 40,
        elapsedMs: 1000,
        limitedBy: (rates[i] ?? 0) < (demandPerSec[i] ?? 0) ? 'orchestration' : 'none',
        maxLimit: 100,
        budgetQps: budgets[i] ?? 1,
        leaseMs: 20_000,
        fairRatePerSec: fairEngineRate(entries, String(i), r * 1000),
      }),
    );
  }
  return Number.POSITIVE_INFINITY;
}

test('accounts ramping on an idle engine reach their demand: fair rates do not freeze the sum while runs start promptly', (t) => {
  // The demo's accounts (budgets 9 / 8 / 9 QPS, ~7 executions/s each) and a skewed set.
  for (const [budgets, demand] of [
    [
      [9, 8, 9],
      [7, 7, 7],
    ],
    [
      [10, 40, 80],
      [12, 12, 40],
    ],
  ] as const) {
    const rounds = rampRounds(budgets, demand);
    t.diagnostic(`budgets ${budgets.join(' / ')}, demand ${demand.join(' / ')}/s: reached in ${rounds} rounds`);
    assert.ok(rounds <= 12, `budgets ${budgets.join(' / ')}: demand reached in ${rounds} rounds`);
  }
});

test('an account whose budget is far above what the engine runs grows by doubling, then by a quarter of its limit, not to its configured limit at once', () => {
  // The bench's capacity accounts: 5 000 QPS (a step of 500 by the budget), a configured limit of 200.
  let state = initialInflightControl(200, 5000);
  assert.equal(state.limit, 10);
  state = nextInflightControl(state, round({ budgetQps: 5000, starts: 10 }));
  assert.equal(state.limit, 20, 'slow start doubles');
  // Fewer starts than half the limit: no doubling, and the additive step is a quarter of the limit.
  state = nextInflightControl(state, round({ budgetQps: 5000, starts: 8, lagSumMs: 8 * 50 }));
  assert.equal(state.limit, 25);
  state = nextInflightControl({ ...state, slowStart: false }, round({ budgetQps: 5000, starts: 20, lagSumMs: 20 * 50 }));
  assert.equal(state.limit, 31.25);
  // A small limit still grows by one execution a round.
  assert.equal(nextInflightControl({ ...initialInflightControl(200, 5000), limit: 2, slowStart: false }, round({ budgetQps: 5000, starts: 2 })).limit, 3);
});
