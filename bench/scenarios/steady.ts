/**
 * steady: offered load at 70 % of the feasible load — min(budget, orchestration capacity measured
 * in this invocation) — for 10 minutes → lateness (execution start − earliest due, as recorded in
 * card_execution.details.latenessMs) p50/p95/p99/max, expired leases and rejected calls.
 */
import { windowSeconds, type Scenario } from '../lib/context.js';
import { createBenchStack } from '../lib/stack.js';
import { seedAccount, spreadDues } from '../lib/seed.js';
import { cpuNote, leaseExpiries, measureWindow } from '../lib/window.js';
import { latenessBetween } from '../lib/measure.js';
import { round } from '../lib/stats.js';
import { capacityNote, orchestrationCapacity } from '../lib/capacity.js';
import { atLeast, atMost, none, percent, seconds as inSeconds } from '../lib/verdict.js';
import { STEADY_BUDGETS, STEADY_INTERVAL_SEC, STEADY_LOAD, feasibleLoad, steadySpecs } from './steadyLoad.js';

/** Issue 11 target for lateness at 70 % of the feasible load. */
export const LATENESS_P99_LIMIT_MS = 2000;
/** Executions in the window ÷ executions due: below this the orchestration fell behind. */
const KEEP_UP_SHARE = 0.95;
const STEADY_DEFAULT_SEC = 600;

export const steady: Scenario = async (context) => {
  // Warm-up covers the first round of every card (initial dues spread over one interval) and a few seconds more.
  const base = windowSeconds(context, { warmupSec: STEADY_INTERVAL_SEC + 5, durationSec: STEADY_DEFAULT_SEC });
  const seconds = { ...base, durationSec: context.options.steadyDurationSec ?? base.durationSec };
  const capacity = await orchestrationCapacity(context);
  const feasible = feasibleLoad(capacity.perSecond);
  context.log(
    `capacity ${capacity.perSecond}/s, budgets ${feasible.budgetQps} QPS → feasible ${feasible.feasibleQps}/s (limited by ${feasible.limitedBy}); offering ${STEADY_LOAD * 100} %`,
  );
  const stack = await createBenchStack(context.config, 'steady');
  try {
    const accounts = [];
    for (const spec of steadySpecs('', feasible)) accounts.push(await seedAccount(stack, spec));
    // Offered load at 70 % means 70 % in every second, not a burst of all cards at once.
    for (const account of accounts) await spreadDues(stack, account, 'card_status', STEADY_INTERVAL_SEC * 1000);
    await stack.startOrchestration();
    const window = await measureWindow(stack, seconds, context.log);
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
    rows.push(['all', feasible.budgetQps, feasible.feasibleQps, round(offeredTotal, 1), '', all.executions, l.p50, l.p95, l.p99, l.max]);
    const expected = Math.round(offeredTotal * window.seconds);
    const expired = leaseExpiries(window.end);
    const verdicts = [
      atMost('lateness p99', l.p99, LATENESS_P99_LIMIT_MS, inSeconds, `${all.executions} executions in ${round(window.seconds)} s`),
      none('expired leases (whole run)', expired),
      none('calls rejected by the simulator (whole run)', rejected),
      atLeast(
        'executions ÷ due in the window',
        expected > 0 ? all.executions / expected : 0,
        KEEP_UP_SHARE,
        percent,
        `${all.executions} of ${expected}: below this the orchestration fell behind the offered load`,
      ),
    ];
    return {
      title: `lateness at ${STEADY_LOAD * 100} % of the feasible load`,
      explain: [
        `Feasible = min(budget, orchestration capacity): capacity ${capacity.perSecond} executions/s (${capacity.source}) against ${feasible.budgetQps} QPS of budgets, shared by budget → ${feasible.feasibleQps}/s, limited by ${feasible.limitedBy}.`,
        `Cards = ${STEADY_LOAD} × feasible QPS × ${STEADY_INTERVAL_SEC} s interval, one card_status call each per interval, first dues spread evenly over the interval (a fleet in its steady state; cards created in one batch get dues jittered over max(interval/10, 2 s), DESIGN §7, and keep that phase: at 70 % of a 10-QPS budget with a 10-s interval that is 70 calls due within 2 s, whose p99 lateness cannot be under ~5 s). Lateness = execution start − earliest due (card_execution.details.latenessMs), ms, executions that started in the window.`,
      ],
      config: {
        ...seconds,
        intervalSec: STEADY_INTERVAL_SEC,
        load: STEADY_LOAD,
        budgets: STEADY_BUDGETS.map((b) => `${b.name}:${b.qps}`).join(' '),
        capacityPerSecond: capacity.perSecond,
        feasibleQps: feasible.feasibleQps,
      },
      results: {
        windowSeconds: round(window.seconds),
        capacity,
        feasible,
        all,
        perAccount,
        expectedExecutions: expected,
        expiredLeases: expired,
        rejected,
        cpuShares: window.cpu,
      },
      tables: [
        {
          headers: ['account', 'budget QPS', 'feasible/s', 'offered/s', 'calls/s', 'executions', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms'],
          numeric: [false, true, true, true, true, true, true, true, true, true],
          rows,
        },
      ],
      verdicts,
      notes: [capacityNote(capacity, all.executions / window.seconds, expected / window.seconds), cpuNote(window.cpu)],
    };
  } finally {
    await stack.close();
  }
};
