/**
 * saturate: three accounts whose due cards far exceed their budgets (3× the calls the budget
 * allows), the budgets scaled below the orchestration capacity measured in this invocation so the
 * budget, not the engine, is what limits. Over a steady window after warm-up: gateway calls per
 * second ÷ budget per group (utilisation, from the simulator's counters), the simulator's highest
 * one-second count and its rejected calls (must be 0), and rate-limit deferrals.
 */
import { MAX_WINDOW_MARGIN_MS, MIN_WINDOW_MARGIN_MS } from '../../src/ratelimit/sendDelay.js';
import type { GatewayCheckType } from '../../src/workflow-safe/checkTypes.js';
import { windowSeconds, type Scenario } from '../lib/context.js';
import { createBenchStack } from '../lib/stack.js';
import { seedAccount, type AccountSpec } from '../lib/seed.js';
import { cpuNote, deferralsDuring, measureWindow } from '../lib/window.js';
import { latenessBetween } from '../lib/measure.js';
import { round } from '../lib/stats.js';
import { capacityNote, orchestrationCapacity } from '../lib/capacity.js';
import { atLeast, atMost, none, percent, type Verdict } from '../lib/verdict.js';

const INTERVAL_SEC = 10;
/** Due calls per second ÷ budget: far above 1 so the backlog never drains. */
const OVERLOAD = 3;
const LATENCY = { p50: 5, p99: 20 };
const TYPE_GROUPS = { card_status: 'status', carddata: 'data' } as const;

/** Target: utilisation of every group under backlog, budgets below the engine's capacity. */
const UTILISATION_TARGET = 0.9;
/** Budgets are scaled so their sum is at most this share of the capacity: the engine keeps headroom. */
const CAPACITY_HEADROOM = 0.8;

/** 5, 20 and 50 QPS in total, the larger two split over a status and a data group (before scaling). */
const BUDGETS: readonly { name: string; qps: Record<string, number> }[] = [
  { name: 'sat5', qps: { status: 5 } },
  { name: 'sat20', qps: { status: 12, data: 8 } },
  { name: 'sat50', qps: { status: 30, data: 20 } },
];

/**
 * Every call may be its own execution (a card's two types fall due apart), so the budgets' sum is
 * the executions/s they can ask for; scaled down, never below 1 QPS, when above the headroom.
 */
function scaledBudgets(capacityPerSecond: number): { factor: number; budgets: { name: string; qps: Record<string, number> }[] } {
  const total = BUDGETS.reduce((n, b) => n + Object.values(b.qps).reduce((m, q) => m + q, 0), 0);
  const factor = Math.min(1, (CAPACITY_HEADROOM * capacityPerSecond) / total);
  return {
    factor: round(factor, 3),
    budgets: BUDGETS.map((b) => ({
      name: b.name,
      qps: Object.fromEntries(Object.entries(b.qps).map(([group, qps]) => [group, Math.max(1, Math.round(qps * factor))])),
    })),
  };
}

function specOf(budget: { name: string; qps: Record<string, number> }): AccountSpec {
  const types = (Object.keys(TYPE_GROUPS) as GatewayCheckType[]).filter((type) => budget.qps[TYPE_GROUPS[type as keyof typeof TYPE_GROUPS]] !== undefined);
  // Each card makes one call per type per interval: enough cards to ask OVERLOAD × the busiest group.
  const busiest = Math.max(...Object.values(budget.qps));
  return {
    name: budget.name,
    qps: budget.qps,
    typeGroups: Object.fromEntries(types.map((type) => [type, TYPE_GROUPS[type as keyof typeof TYPE_GROUPS]])),
    cards: Math.ceil(OVERLOAD * busiest * INTERVAL_SEC),
    intervalsSec: Object.fromEntries(types.map((type) => [type, INTERVAL_SEC])),
    latencyMs: LATENCY,
  };
}

export const saturate: Scenario = async (context) => {
  const seconds = windowSeconds(context, { warmupSec: 20, durationSec: 60 });
  const capacity = await orchestrationCapacity(context);
  const { factor, budgets } = scaledBudgets(capacity.perSecond);
  context.log(`capacity ${capacity.perSecond}/s → budgets × ${factor}: ${budgets.map((b) => `${b.name} ${JSON.stringify(b.qps)}`).join(', ')}`);
  const stack = await createBenchStack(context.config, 'saturate');
  try {
    const accounts = [];
    for (const budget of budgets) accounts.push(await seedAccount(stack, specOf(budget)));
    context.log(`seeded ${accounts.reduce((n, a) => n + a.cards.length, 0)} cards in ${accounts.length} accounts`);
    await stack.startOrchestration();
    const window = await measureWindow(stack, seconds, context.log);
    const executions = await latenessBetween(stack.pool, window.from, window.to);

    const rows: (string | number)[][] = [];
    const groups: Record<string, unknown>[] = [];
    const verdicts: Verdict[] = [];
    for (const account of accounts) {
      for (const [group, qps] of Object.entries(account.spec.qps)) {
        const before = window.start.calls[account.gatewayAccount]?.[group];
        const after = window.end.calls[account.gatewayAccount]?.[group];
        const calls = (after?.calls ?? 0) - (before?.calls ?? 0);
        const perSecond = calls / window.seconds;
        const utilisation = perSecond / qps;
        const types = Object.entries(account.spec.typeGroups)
          .filter(([, g]) => g === group)
          .map(([type]) => type);
        const deferrals = types.reduce((n, type) => n + deferralsDuring(window, account.carrier.id, type), 0);
        const figures = {
          account: account.spec.name,
          group,
          budgetQps: qps,
          cards: account.cards.length,
          callsInWindow: calls,
          callsPerSecond: round(perSecond),
          utilisation: round(utilisation, 3),
          maxPerSecond: after?.maxPerSecond ?? 0,
          rejected: after?.rejected ?? 0,
          deferralsInWindow: deferrals,
        };
        groups.push(figures);
        rows.push([figures.account, group, qps, figures.callsPerSecond, `${round(utilisation * 100, 1)} %`, figures.maxPerSecond, figures.rejected, deferrals]);
        const name = `${account.spec.name}/${group} (${qps} QPS)`;
        verdicts.push(
          atLeast(`${name} utilisation`, utilisation, UTILISATION_TARGET, percent),
          none(`${name} calls rejected by the simulator (whole run)`, figures.rejected),
          atMost(`${name} most calls in one second`, figures.maxPerSecond, qps, (n) => String(n), 'the budget'),
        );
      }
    }
    // Each grant counts for 1 s + its margin, so a group's ceiling lies between these two.
    const ceilingAt = (marginMs: number): number => round((100 * 1000) / (1000 + marginMs), 1);
    const notes = [
      `The limiter counts each grant in a window of 1 s + its margin against grant→arrival jitter, adapted to the measured ` +
        `grant-to-send delay between ${MIN_WINDOW_MARGIN_MS} and ${MAX_WINDOW_MARGIN_MS} ms: its steady ceiling is ` +
        `${ceilingAt(MAX_WINDOW_MARGIN_MS)}–${ceilingAt(MIN_WINDOW_MARGIN_MS)} % of the budget.`,
      `Executions in the window: ${executions.executions} (${Object.entries(executions.outcomes)
        .map(([o, n]) => `${o} ${n}`)
        .join(', ')}); a deferral is a limiter wait that would pass the step's deadline.`,
      capacityNote(
        capacity,
        executions.executions / window.seconds,
        accounts.reduce((n, a) => n + Object.values(a.spec.qps).reduce((m, q) => m + q, 0), 0),
      ),
      cpuNote(window.cpu),
    ];
    return {
      title: 'budget utilisation under backlog',
      explain: [
        `Budgets ${BUDGETS.map((b) => `${b.name}:${JSON.stringify(b.qps)}`).join(' ')} scaled × ${factor} so their sum ` +
          `stays within ${CAPACITY_HEADROOM * 100} % of the orchestration capacity, ${capacity.perSecond} executions/s ` +
          `(${capacity.source}).`,
        `Cards due ${OVERLOAD}× faster than the busiest group's budget (interval ${INTERVAL_SEC} s). Utilisation = ` +
          `accepted gateway calls per second in the window ÷ budget, from the simulator's counters.`,
        "max/s = the simulator's highest count in any sliding one-second window over the whole run (warm-up included); " +
          'rejected = calls over the limit (whole run, must be 0); deferrals = rate-limit deferrals in the window.',
      ],
      config: {
        ...seconds,
        intervalSec: INTERVAL_SEC,
        overload: OVERLOAD,
        latencyMs: LATENCY,
        capacityPerSecond: capacity.perSecond,
        budgetFactor: factor,
        budgets: budgets.map((b) => `${b.name}:${JSON.stringify(b.qps)}`).join(' '),
      },
      results: { windowSeconds: round(window.seconds), capacity, budgetFactor: factor, groups, executions, cpuShares: window.cpu },
      tables: [
        {
          headers: ['account', 'group', 'budget QPS', 'calls/s', 'utilisation', 'max/s', 'rejected', 'deferrals'],
          numeric: [false, false, true, true, true, true, true, true],
          rows,
        },
      ],
      verdicts,
      notes,
    };
  } finally {
    await stack.close();
  }
};
