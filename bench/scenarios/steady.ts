/**
 * steady: offered load at 70 % of the feasible load — min(budget, orchestration capacity measured
 * in this invocation for the run shape), the budgets scaled up to the capacity when below it — for
 * 10 minutes per run shape (CARD_RUN_SHAPE card / batch, one after the other, each in a fresh
 * stack) → lateness (execution start − earliest due, as recorded in
 * card_execution.details.latenessMs) p50/p95/p99/max, expired leases and rejected calls.
 */
import { windowSeconds, type Scenario, type ScenarioContext } from '../lib/context.js';
import { createBenchStack } from '../lib/stack.js';
import { seedAccount, spreadDues } from '../lib/seed.js';
import { cpuNote, leaseExpiries, measureWindow } from '../lib/window.js';
import { latenessBetween, type LatenessWindow } from '../lib/measure.js';
import type { RunShape } from '../lib/options.js';
import type { CpuTimes } from '../lib/processes.js';
import { round } from '../lib/stats.js';
import { capacityNote, orchestrationCapacity, type Capacity } from '../lib/capacity.js';
import { settledExecutionsBetween } from '../lib/checkCost.js';
import { atLeast, atMost, none, percent, seconds as inSeconds, type Verdict } from '../lib/verdict.js';
import { STEADY_INTERVAL_SEC, STEADY_LOAD, feasibleLoad, steadySpecs, type FeasibleLoad } from './steadyLoad.js';

/** Target for lateness at 70 % of the feasible load, the same in both run shapes. */
export const LATENESS_P99_LIMIT_MS = 2000;
/** Executions in the window ÷ executions due: below this the orchestration fell behind. */
const KEEP_UP_SHARE = 0.95;
const STEADY_DEFAULT_SEC = 600;

interface SteadyRun {
  readonly runShape: RunShape;
  readonly startMode: string;
  readonly windowSeconds: number;
  readonly capacity: Capacity;
  readonly feasible: FeasibleLoad;
  readonly all: LatenessWindow;
  readonly perAccount: Record<string, unknown>[];
  readonly rows: (string | number)[][];
  readonly offeredPerSecond: number;
  readonly expectedExecutions: number;
  readonly expiredLeases: number;
  readonly rejected: number;
  readonly cpuShares: CpuTimes;
}

async function steadyRun(context: ScenarioContext, runShape: RunShape, seconds: { warmupSec: number; durationSec: number }): Promise<SteadyRun> {
  const log = (line: string): void => context.log(`${runShape}: ${line}`);
  const capacity = await orchestrationCapacity(context, { runShape });
  const feasible = feasibleLoad(capacity.perSecond, { scaleBudgetsToCapacity: true });
  log(
    `capacity ${capacity.perSecond}/s, budgets ${feasible.budgetQps} QPS (× ${feasible.budgetScale}) → feasible ${feasible.feasibleQps}/s ` +
      `(limited by ${feasible.limitedBy}); offering ${STEADY_LOAD * 100} %`,
  );
  const stack = await createBenchStack(context.config, `steady-${runShape}`, { cardRunShape: runShape });
  try {
    const accounts = [];
    for (const spec of steadySpecs(runShape === 'card' ? '' : 'b', feasible)) accounts.push(await seedAccount(stack, spec));
    // Offered load at 70 % means 70 % in every second, not a burst of all cards at once.
    for (const account of accounts) await spreadDues(stack, account, 'card_status', STEADY_INTERVAL_SEC * 1000);
    await stack.startOrchestration();
    const window = await measureWindow(stack, seconds, log);
    // Executions still running at the window's end record their rows later (a batch over seconds).
    await settledExecutionsBetween(stack.pool, window.from, window.to);
    const all = await latenessBetween(stack.pool, window.from, window.to);
    const rows: (string | number)[][] = [];
    const perAccount: Record<string, unknown>[] = [];
    let rejected = 0;
    for (const account of accounts) {
      const lateness = await latenessBetween(stack.pool, window.from, window.to, `carrier_id = ${Number(account.carrier.id)}`);
      const qps = account.spec.qps.status ?? 0;
      const calls = (window.end.calls[account.gatewayAccount]?.status?.calls ?? 0) - (window.start.calls[account.gatewayAccount]?.status?.calls ?? 0);
      rejected += window.end.calls[account.gatewayAccount]?.status?.rejected ?? 0;
      const offered = account.cards.length / STEADY_INTERVAL_SEC;
      perAccount.push({ account: account.spec.name, budgetQps: qps, offeredPerSecond: offered, callsPerSecond: round(calls / window.seconds), ...lateness });
      const l = lateness.latenessMs;
      rows.push([
        runShape,
        account.spec.name,
        qps,
        round(qps * feasible.feasibleShare, 1),
        round(offered, 1),
        round(calls / window.seconds),
        lateness.executions,
        l.p50,
        l.p95,
        l.p99,
        l.max,
      ]);
    }
    const l = all.latenessMs;
    const offeredTotal = accounts.reduce((n, a) => n + a.cards.length, 0) / STEADY_INTERVAL_SEC;
    rows.push([runShape, 'all', feasible.budgetQps, feasible.feasibleQps, round(offeredTotal, 1), '', all.executions, l.p50, l.p95, l.p99, l.max]);
    return {
      runShape,
      startMode: stack.config.CARD_START_MODE,
      windowSeconds: round(window.seconds),
      capacity,
      feasible,
      all,
      perAccount,
      rows,
      offeredPerSecond: round(offeredTotal, 1),
      expectedExecutions: Math.round(offeredTotal * window.seconds),
      expiredLeases: leaseExpiries(window.end),
      rejected,
      cpuShares: window.cpu,
    };
  } finally {
    await stack.close();
  }
}

function steadyVerdicts(run: SteadyRun): Verdict[] {
  const l = run.all.latenessMs;
  const tag = `(${run.runShape} runs)`;
  return [
    atMost(`lateness p99 ${tag}`, l.p99, LATENESS_P99_LIMIT_MS, inSeconds, `${run.all.executions} executions in ${run.windowSeconds} s`),
    none(`expired leases ${tag} (whole run)`, run.expiredLeases),
    none(`calls rejected by the simulator ${tag} (whole run)`, run.rejected),
    atLeast(
      `executions ÷ due in the window ${tag}`,
      run.expectedExecutions > 0 ? run.all.executions / run.expectedExecutions : 0,
      KEEP_UP_SHARE,
      percent,
      `${run.all.executions} of ${run.expectedExecutions}: below this the orchestration fell behind the offered load`,
    ),
  ];
}

export const steady: Scenario = async (context) => {
  // Warm-up covers the first round of every card (initial dues spread over one interval) and a few seconds more.
  const base = windowSeconds(context, { warmupSec: STEADY_INTERVAL_SEC + 5, durationSec: STEADY_DEFAULT_SEC });
  const seconds = { ...base, durationSec: context.options.steadyDurationSec ?? base.durationSec };
  const runs: SteadyRun[] = [];
  for (const runShape of context.options.runShapes) runs.push(await steadyRun(context, runShape, seconds));
  const first = runs[0]!;
  return {
    title: `lateness at ${STEADY_LOAD * 100} % of the feasible load, per run shape`,
    explain: [
      `Feasible = min(budget, orchestration capacity of the run shape): ${runs
        .map(
          (run) =>
            `${run.runShape} runs: capacity ${run.capacity.perSecond} checks/s (${run.capacity.source}) against ${run.feasible.budgetQps} QPS of ` +
            `budgets (${run.feasible.budgets.map((b) => `${b.name} ${b.qps}`).join(', ')}; the defined ones × ${run.feasible.budgetScale}), ` +
            `shared by budget → ${run.feasible.feasibleQps}/s, limited by ${run.feasible.limitedBy}`,
        )
        .join('; ')}. Budgets below the capacity are scaled up to it (same proportions): the load is ${STEADY_LOAD * 100} % of what ` +
        `the run shape itself sustains.`,
      `Cards = ${STEADY_LOAD} × feasible QPS × ${STEADY_INTERVAL_SEC} s interval, one card_status call each per interval, first dues spread evenly over the interval (a fleet in its steady state; cards created in one batch get dues jittered over max(interval/10, 2 s), docs/design.md "Lifecycle", and keep that phase: at 70 % of a 10-QPS budget with a 10-s interval that is 70 calls due within 2 s, whose p99 lateness cannot be under ~5 s). Lateness = execution start − earliest due (card_execution.details.latenessMs), ms, executions that started in the window.`,
      `Each run shape in a fresh stack, one after the other, ${first.startMode} starts (CARD_START_MODE).`,
    ],
    config: {
      ...seconds,
      intervalSec: STEADY_INTERVAL_SEC,
      load: STEADY_LOAD,
      runShapes: context.options.runShapes.join(','),
      CARD_START_MODE: first.startMode,
      CARD_BATCH_SIZE: context.config.CARD_BATCH_SIZE,
      budgets: runs.map((run) => `${run.runShape}: ${run.feasible.budgets.map((b) => `${b.name}:${b.qps}`).join(' ')}`).join('; '),
      capacityPerSecond: runs.map((run) => `${run.runShape}: ${run.capacity.perSecond}`).join('; '),
    },
    results: {
      runs: runs.map((run) => ({
        runShape: run.runShape,
        startMode: run.startMode,
        windowSeconds: run.windowSeconds,
        capacity: run.capacity,
        feasible: run.feasible,
        offeredPerSecond: run.offeredPerSecond,
        all: run.all,
        perAccount: run.perAccount,
        expectedExecutions: run.expectedExecutions,
        expiredLeases: run.expiredLeases,
        rejected: run.rejected,
        cpuShares: run.cpuShares,
      })),
    },
    tables: [
      {
        headers: ['run shape', 'account', 'budget QPS', 'feasible/s', 'offered/s', 'calls/s', 'executions', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms'],
        numeric: [false, false, true, true, true, true, true, true, true, true, true],
        rows: runs.flatMap((run) => run.rows),
      },
    ],
    verdicts: runs.flatMap(steadyVerdicts),
    notes: runs.flatMap((run) => [
      `${run.runShape} runs: ${capacityNote(run.capacity, run.all.executions / run.windowSeconds, run.expectedExecutions / run.windowSeconds)}`,
      `${run.runShape} runs: ${cpuNote(run.cpuShares)}`,
    ]),
  };
};
