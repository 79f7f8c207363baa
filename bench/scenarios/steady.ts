/**
 * steady: offered load at ~70 % of the budget → lateness (execution start − earliest due, as
 * recorded in card_execution.details.latenessMs) p50/p95/p99/max over a window after warm-up.
 */
import { windowSeconds, type Scenario } from '../lib/context.js';
import { createBenchStack } from '../lib/stack.js';
import { seedAccount } from '../lib/seed.js';
import { cpuNote, measureWindow } from '../lib/window.js';
import { latenessBetween } from '../lib/measure.js';
import { round } from '../lib/stats.js';
import { capacityNote } from '../lib/previous.js';
import { STEADY_BUDGETS, STEADY_INTERVAL_SEC, STEADY_LOAD, steadySpecs } from './steadyLoad.js';

/** §11 expectation for lateness under 70 % load. */
export const LATENESS_P99_LIMIT_MS = 2000;

export const steady: Scenario = async (context) => {
  // Warm-up covers the first round of every card (initial dues are jittered over 2 s) and one interval.
  const seconds = windowSeconds(context, { warmupSec: STEADY_INTERVAL_SEC + 5, durationSec: 60 });
  const stack = await createBenchStack(context.config, 'steady');
  try {
    const accounts = [];
    for (const spec of steadySpecs('')) accounts.push(await seedAccount(stack, spec));
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
      rows.push([account.spec.name, qps, round(offered, 1), round(calls / window.seconds), lateness.executions, l.p50, l.p95, l.p99, l.max]);
    }
    const l = all.latenessMs;
    rows.push(['all', STEADY_BUDGETS.reduce((n, b) => n + b.qps, 0), round(accounts.reduce((n, a) => n + a.cards.length, 0) / STEADY_INTERVAL_SEC, 1), '', all.executions, l.p50, l.p95, l.p99, l.max]);
    const misses: string[] = [];
    if (l.p99 > LATENESS_P99_LIMIT_MS) misses.push(`lateness p99 ${l.p99} ms > ${LATENESS_P99_LIMIT_MS} ms under ${STEADY_LOAD * 100} % load.`);
    if (rejected > 0) misses.push(`${rejected} calls rejected by the simulator (must be 0).`);
    const expected = Math.round((accounts.reduce((n, a) => n + a.cards.length, 0) / STEADY_INTERVAL_SEC) * window.seconds);
    if (all.executions < expected * 0.95) misses.push(`${all.executions} executions in the window, ${expected} due: the orchestration did not keep up with the offered load.`);
    return {
      title: `lateness at ${STEADY_LOAD * 100} % of the budget`,
      explain: [
        `Cards = ${STEADY_LOAD} × QPS × ${STEADY_INTERVAL_SEC} s interval, one card_status call each per interval. Lateness = execution start − earliest due (card_execution.details.latenessMs), ms, executions that started in the window.`,
      ],
      config: { ...seconds, intervalSec: STEADY_INTERVAL_SEC, load: STEADY_LOAD, budgets: STEADY_BUDGETS.map((b) => `${b.name}:${b.qps}`).join(' ') },
      results: { windowSeconds: round(window.seconds), all, perAccount, expectedExecutions: expected, rejected, cpuShares: window.cpu },
      tables: [
        {
          headers: ['account', 'budget QPS', 'offered/s', 'calls/s', 'executions', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms'],
          numeric: [false, true, true, true, true, true, true, true, true],
          rows,
        },
      ],
      misses,
      notes: [capacityNote(context, all.executions / window.seconds, expected / window.seconds), cpuNote(window.cpu)],
    };
  } finally {
    await stack.close();
  }
};
