/**
 * burst (docs/design.md §11 'Request-check and priority items', §4.2 'The claim loop as an
 * activity'): 500 request-checks of distinct cards of one account sent at once, 100 concurrent, as
 * the API serves them, then the same 500 again — an operator re-checking a customer's cards. The
 * target account has a small budget (6 QPS on card_status) and 1 000 cards polled every 300 s;
 * three other accounts run a steady load beside it. Per scheduler loop (SCHEDULER_LOOP, batch runs),
 * on a fresh stack each:
 *
 * - the answers: status counts, request → answer p50/p99;
 * - workflow task timeouts and failures in the schedulers' and pollingControl's histories;
 * - the longest gap between the target account's claim rounds, from the time each round stamps in
 *   the `cardpoller_scheduler_last_round_timestamp_seconds` gauge (the claim round sets it, in either
 *   loop), read every 100 ms; cross-checked with the claim loop's published view (activity loop) or
 *   the `claimRound` markers of its history (workflow loop);
 * - the time to drain the priority lane: the first request → every requested card's first gateway
 *   call after its latest request (the simulator's per-card stamp), against the calls that took at
 *   the account's budget rate;
 * - the other accounts' checks/s and lateness p99 during the burst against a window before it.
 */
import { serveRequestCheck } from '../../src/app/requestCheckService.js';
import type { ScopedCard } from '../../src/domain/card.js';
import { pollingControlWorkflowId, schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { LOOP_WORKFLOW_TASK_TIMEOUT_MS } from '../../src/workflow-safe/loopTaskTimeout.js';
import type { SchedulerLoop } from '../../src/workflow-safe/claimLoop.js';
import { windowSeconds, type Scenario, type ScenarioContext } from '../lib/context.js';
import { createBenchStack, type BenchStack } from '../lib/stack.js';
import { seedAccount, spreadDues, type AccountSpec, type SeededAccount } from '../lib/seed.js';
import { cpuNote, measureWindow, reading, type Reading } from '../lib/window.js';
import { latenessBetween } from '../lib/measure.js';
import { noopCeiling } from '../lib/capacity.js';
import { countEvents, emptyCounts, eventsInWindow, type EventCounts } from '../lib/actions.js';
import { schedulerRounds } from '../lib/schedulerRounds.js';
import { cpuShares, type CpuTimes } from '../lib/processes.js';
import type { Table } from '../lib/report.js';
import { distribution, round, sleep, type Distribution } from '../lib/stats.js';
import { atLeast, atMost, none, percent, perSecond, seconds as inSeconds, type Verdict } from '../lib/verdict.js';
import { watchFirstCalls, type Pending } from './priority.js';
import { longestGap, ROUND_GAP_METRIC, SAMPLE_EVERY_MS, watchRounds, type Gap } from '../lib/roundWatch.js';

/** The account the burst hits: a small budget, a fleet polled on a normal schedule. */
const TARGET: AccountSpec = {
  name: 'burst',
  qps: { status: 6 },
  typeGroups: { card_status: 'status' },
  cards: 1000,
  intervalsSec: { card_status: 300 },
  latencyMs: { p50: 20, p99: 80 },
  // The target asks for the priority lane drained at the budget rate, which is what ratio 0 means
  // (docs/design.md, 'claim': the priority lane takes the whole round). The default 0.2 keeps part
  // of each round for a normal lane with cards due, and drains slower by design: 127–133 s for the
  // 94 s the budget allows in development runs of this scenario.
  priorityRatio: 0,
};
/** The others: 5 checks/s each on a 10-QPS budget. */
const OTHERS: readonly AccountSpec[] = ['calm1', 'calm2', 'calm3'].map((name) => ({
  name,
  qps: { status: 10 },
  typeGroups: { card_status: 'status' },
  cards: 300,
  intervalsSec: { card_status: 60 },
  latencyMs: { p50: 20, p99: 80 },
}));
/** Request-checks per wave, of distinct cards of the target account (every other card of its fleet). */
const BURST = 500;
const CONCURRENCY = 100;
const WAVES = 2;
/** The simulator's per-card stamps are read this often (the stamp is the simulator's: this only bounds how soon a later call could hide the first). */
const WATCH_EVERY_MS = 250;
/** Checks per second of the other accounts are also counted in buckets this long (their slowest bucket shows a pause). */
const BUCKET_MS = 10_000;
/** The drain is waited for at most this many times what the budget needs for the burst. */
const DRAIN_LIMIT_FACTOR = 3;
/** The targets (issue on many accounts: "bursts of request-checks are ordinary"). */
const ROUND_GAP_MAX_MS = 2000;
const DRAIN_OVER_BUDGET_MAX = 1.1;
/** Each other account's checks/s during the burst ÷ before it. */
const OTHERS_SHARE_MIN = 0.9;
/** The other accounts' lateness p99 during the burst (the issue's lateness target for a fleet). */
const OTHERS_LATENESS_P99_MS = 2000;

interface AccountRates {
  readonly account: string;
  readonly beforePerSec: number;
  readonly duringPerSec: number;
  readonly ratio: number;
  /** The slowest full bucket of the burst window. */
  readonly slowestBucketPerSec: number | null;
  readonly latenessP99BeforeMs: number;
  readonly latenessP99DuringMs: number;
  readonly offeredPerSec: number;
}

interface BurstRun {
  readonly schedulerLoop: SchedulerLoop;
  readonly baselineSeconds: number;
  readonly burstSeconds: number;
  readonly waves: readonly {
    readonly sent: number;
    readonly statuses: Record<string, number>;
    readonly toAnswerMs: Distribution;
    readonly sendSeconds: number;
  }[];
  readonly drain: {
    /** First request → every requested card's first call after its latest request; null: not within the limit. */
    readonly ms: number | null;
    readonly limitMs: number;
    readonly cardsCalled: number;
    readonly cardsRequested: number;
    /** Gateway calls of the requested cards from the first request to the drain's end (the simulator's per-card counts). */
    readonly requestedCardCalls: number;
    /** Every call of the account in that time (the normal lane's included). */
    readonly accountCalls: number;
    /** accountCalls per second ÷ the budget: how much of the budget the account used while draining. */
    readonly budgetUsed: number | null;
    /** What held the account's rounds back while draining: samples per factor. */
    readonly limitedBy: Record<string, number>;
    /** Priority executions of the account started in that time (card_execution.from_priority). */
    readonly priorityExecutions: number;
    /** What the calls take at the budget rate: requestedCardCalls ÷ budget. */
    readonly atBudgetMs: number;
    readonly ratePerSec: number | null;
  };
  readonly gaps: {
    readonly baseline: Gap;
    readonly burst: Gap;
    /** Activity loop: the loop view's round counter; workflow loop: the history's claimRound markers. */
    readonly crossCheck: Gap & { readonly source: string };
    readonly sampleBoundMs: number;
    readonly idleSamples: number;
    readonly samples: number;
  };
  readonly tasks: { readonly target: EventCounts; readonly others: EventCounts; readonly control: EventCounts; readonly from: string; readonly to: string };
  readonly target: { readonly normalBeforePerSec: number; readonly normalDuringPerSec: number; readonly priorityDuringPerSec: number };
  readonly others: readonly AccountRates[];
  readonly cpu: { readonly baseline: CpuTimes; readonly burst: CpuTimes };
}

/** Sends one wave: each card's request-check as the API serves it, `CONCURRENCY` at a time; resolves once every one answered. */
async function sendWave(stack: BenchStack, carrierId: string, cards: readonly ScopedCard[], sent: Pending[]): Promise<Pending[]> {
  const wave: Pending[] = [];
  // As the API serves it (src/api/routes/requestCheck.ts): a wake for a workflow loop only.
  const options = { wake: stack.config.SCHEDULER_LOOP === 'workflow' };
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < cards.length; i = next++) {
      const pending: Pending = { card: cards[i]!, carrierId, requestedAt: Date.now() };
      wave.push(pending);
      sent.push(pending);
      try {
        const result = await serveRequestCheck(
          stack.ref,
          stack.services.requests,
          carrierId,
          {
            cardId: pending.card.id,
            types: ['card_status'],
            actor: 'bench',
            source: 'bench',
          },
          options,
        );
        pending.status = result.status;
      } catch (error) {
        pending.status = `error: ${error instanceof Error ? error.name : String(error)}`;
      }
      pending.answeredAt = Date.now();
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return wave;
}

/** Executions per account started in [from, to), the normal lane and the priority lane apart, and per bucket of {@link BUCKET_MS}. */
async function executionCounts(
  stack: BenchStack,
  from: number,
  to: number,
): Promise<{ normal: Map<string, number>; priority: Map<string, number>; buckets: Map<string, number[]> }> {
  const { rows } = await stack.pool.query<{ carrier_id: string; from_priority: boolean; bucket: number; n: string }>(
    `SELECT carrier_id::text, from_priority, floor(extract(epoch FROM started_at - $1::timestamptz) * 1000 / $3)::int AS bucket, count(*)::text AS n
       FROM card_execution WHERE started_at >= $1 AND started_at < $2 GROUP BY 1, 2, 3`,
    [new Date(from), new Date(to), BUCKET_MS],
  );
  const normal = new Map<string, number>();
  const priority = new Map<string, number>();
  const buckets = new Map<string, number[]>();
  const fullBuckets = Math.floor((to - from) / BUCKET_MS);
  for (const row of rows) {
    const lane = row.from_priority ? priority : normal;
    lane.set(row.carrier_id, (lane.get(row.carrier_id) ?? 0) + Number(row.n));
    const counts = buckets.get(row.carrier_id) ?? Array.from({ length: fullBuckets }, () => 0);
    if (row.bucket < fullBuckets) counts[row.bucket] = (counts[row.bucket] ?? 0) + Number(row.n);
    buckets.set(row.carrier_id, counts);
  }
  return { normal, priority, buckets };
}

/** Calls of each card so far (the simulator's per-card counts). */
async function cardCalls(stack: BenchStack): Promise<Record<string, number>> {
  const cards = (await stack.simulator.stats()).cards ?? {};
  return Object.fromEntries(Object.entries(cards).map(([iccid, card]) => [iccid, card.calls]));
}

function accountCalls(r: Reading, gatewayAccount: string): number {
  return Object.values(r.calls[gatewayAccount] ?? {}).reduce((n, group) => n + group.calls, 0);
}

async function taskCounts(stack: BenchStack, workflowIds: readonly string[], from: Date, to: Date): Promise<EventCounts> {
  const counts = emptyCounts();
  for (const id of workflowIds) countEvents(await eventsInWindow(stack.client, id, from, to), counts);
  return counts;
}

async function burstRun(context: ScenarioContext, schedulerLoop: SchedulerLoop, seconds: { warmupSec: number; durationSec: number }): Promise<BurstRun> {
  const log = (line: string): void => context.log(`${schedulerLoop} loop: ${line}`);
  const stack = await createBenchStack(context.config, `burst-${schedulerLoop}`, {
    schedulerLoop,
    cardRunShape: 'batch',
    // A workflow loop starts its runs with the client (the mode docs/capacity.md's figures favour); a claim loop always does.
    cardStartMode: 'client',
  });
  try {
    const target = await seedAccount(stack, TARGET);
    const others: SeededAccount[] = [];
    for (const spec of OTHERS) others.push(await seedAccount(stack, spec));
    // A fleet in its steady state: first dues spread over one interval.
    for (const account of [target, ...others]) await spreadDues(stack, account, 'card_status', (account.spec.intervalsSec.card_status ?? 60) * 1000);
    // Every other card of the target's fleet: the requested cards' own dues are spread like the fleet's.
    const requested = target.cards.filter((_, i) => i % 2 === 0).slice(0, BURST);
    const budgetQps = Object.values(TARGET.qps).reduce((a, b) => a + b, 0);
    await stack.startOrchestration();

    const rounds = watchRounds(stack, target.carrier.id, schedulerLoop);
    log(`baseline window (${seconds.durationSec} s) before the burst`);
    const baseline = await measureWindow(stack, seconds, log);
    const sent: Pending[] = [];
    const watcher = watchFirstCalls(stack, sent, WATCH_EVERY_MS);
    const callsBefore = await cardCalls(stack);
    const burstStart = await reading(stack);
    const waves: BurstRun['waves'][number][] = [];
    const latest = new Map<string, Pending>();
    for (let w = 1; w <= WAVES; w += 1) {
      log(`wave ${w}: ${requested.length} request-checks, ${CONCURRENCY} concurrent`);
      const began = Date.now();
      const wave = await sendWave(stack, target.carrier.id, requested, sent);
      for (const p of wave) latest.set(p.card.id, p);
      const statuses: Record<string, number> = {};
      for (const p of wave) statuses[p.status ?? 'no answer'] = (statuses[p.status ?? 'no answer'] ?? 0) + 1;
      waves.push({
        sent: wave.length,
        statuses,
        toAnswerMs: distribution(wave.map((p) => (p.answeredAt ?? p.requestedAt) - p.requestedAt)),
        sendSeconds: round((Date.now() - began) / 1000, 1),
      });
    }
    const firstRequestAt = burstStart.at.getTime();
    const limitMs = DRAIN_LIMIT_FACTOR * (BURST / budgetQps) * 1000;
    // Drained: every card requested in the last wave was called after that request (a call that served both waves counts once).
    const open = (): Pending[] => [...latest.values()].filter((p) => p.status === 'requested' && p.firstCallAt === undefined);
    while (open().length > 0 && Date.now() - firstRequestAt < limitMs) await sleep(WATCH_EVERY_MS);
    await watcher.stop();
    const called = [...latest.values()].filter((p) => p.firstCallAt !== undefined);
    const drained = open().length === 0;
    const drainEnd = drained ? Math.max(firstRequestAt, ...called.map((p) => p.firstCallAt!)) : firstRequestAt + limitMs;
    const burstEnd = await reading(stack);
    const callsAfter = await cardCalls(stack);
    log(
      drained ? `drained after ${round((drainEnd - firstRequestAt) / 1000, 1)} s` : `not drained within ${limitMs / 1000} s (${open().length} cards waiting)`,
    );
    // A workflow task times out LOOP_WORKFLOW_TASK_TIMEOUT_MS after it started: wait that long past the last answer before reading histories.
    const lastAnswer = Math.max(...sent.map((p) => p.answeredAt ?? p.requestedAt));
    await sleep(Math.max(0, lastAnswer + LOOP_WORKFLOW_TASK_TIMEOUT_MS + 5000 - Date.now()));
    const samples = await rounds.stop();
    const tasksTo = new Date();

    const requestedCardCalls = requested.reduce((n, card) => n + (callsAfter[card.iccid] ?? 0) - (callsBefore[card.iccid] ?? 0), 0);
    const schedulerId = (account: SeededAccount): string => schedulerWorkflowId(account.carrier.id, stack.ref.workflowIdPrefix);
    const [targetTasks, otherTasks, controlTasks] = await Promise.all([
      taskCounts(stack, [schedulerId(target)], baseline.from, tasksTo),
      taskCounts(stack, others.map(schedulerId), baseline.from, tasksTo),
      taskCounts(stack, [pollingControlWorkflowId(stack.ref.workflowIdPrefix)], baseline.from, tasksTo),
    ]);
    const burstGap = longestGap(samples.gaugeRounds, firstRequestAt, drainEnd);
    const crossCheck =
      schedulerLoop === 'activity'
        ? { ...longestGap(samples.viewChanges, firstRequestAt, drainEnd), source: "the loop view's round counter (Redis), seen to change" }
        : await schedulerRounds(stack.client, schedulerId(target), new Date(firstRequestAt), new Date(drainEnd)).then((r) => ({
            ms: r.longestGapMs,
            from: r.longestGapFrom,
            rounds: r.rounds,
            source: "the history's claimRound markers",
          }));

    const before = await executionCounts(stack, baseline.from.getTime(), baseline.to.getTime());
    const during = await executionCounts(stack, firstRequestAt, drainEnd);
    const baselineSec = baseline.seconds;
    const burstSec = (drainEnd - firstRequestAt) / 1000;
    const otherRates: AccountRates[] = [];
    for (const account of others) {
      const id = account.carrier.id;
      const where = `carrier_id = ${Number(id)}`;
      const [lateBefore, lateDuring] = await Promise.all([
        latenessBetween(stack.pool, baseline.from, baseline.to, where),
        latenessBetween(stack.pool, new Date(firstRequestAt), new Date(drainEnd), where),
      ]);
      const beforePerSec = ((before.normal.get(id) ?? 0) + (before.priority.get(id) ?? 0)) / baselineSec;
      const duringPerSec = ((during.normal.get(id) ?? 0) + (during.priority.get(id) ?? 0)) / burstSec;
      const buckets = during.buckets.get(id) ?? [];
      otherRates.push({
        account: account.spec.name,
        beforePerSec: round(beforePerSec, 2),
        duringPerSec: round(duringPerSec, 2),
        ratio: beforePerSec > 0 ? round(duringPerSec / beforePerSec, 3) : 0,
        slowestBucketPerSec: buckets.length === 0 ? null : round(Math.min(...buckets) / (BUCKET_MS / 1000), 2),
        latenessP99BeforeMs: lateBefore.latenessMs.p99,
        latenessP99DuringMs: lateDuring.latenessMs.p99,
        offeredPerSec: round(account.spec.cards / (account.spec.intervalsSec.card_status ?? 60), 2),
      });
    }
    const targetId = target.carrier.id;
    const callsOfAccount = accountCalls(burstEnd, target.gatewayAccount) - accountCalls(burstStart, target.gatewayAccount);
    const limitedBy: Record<string, number> = {};
    for (const sample of samples.limitedBy)
      if (sample.at >= firstRequestAt && sample.at < drainEnd) limitedBy[sample.factor] = (limitedBy[sample.factor] ?? 0) + 1;
    return {
      schedulerLoop,
      baselineSeconds: round(baselineSec, 1),
      burstSeconds: round(burstSec, 1),
      waves,
      drain: {
        ms: drained ? drainEnd - firstRequestAt : null,
        limitMs,
        cardsCalled: called.length,
        cardsRequested: [...latest.values()].filter((p) => p.status === 'requested').length,
        requestedCardCalls,
        accountCalls: callsOfAccount,
        budgetUsed: burstSec > 0 ? round(callsOfAccount / burstSec / budgetQps, 3) : null,
        limitedBy,
        priorityExecutions: during.priority.get(targetId) ?? 0,
        atBudgetMs: round((requestedCardCalls / budgetQps) * 1000),
        ratePerSec: drained && drainEnd > firstRequestAt ? round(requestedCardCalls / burstSec, 2) : null,
      },
      gaps: {
        baseline: longestGap(samples.gaugeRounds, baseline.from.getTime(), baseline.to.getTime()),
        burst: burstGap,
        crossCheck,
        sampleBoundMs: samples.longestSampleIntervalMs,
        idleSamples: samples.idleSamples,
        samples: samples.samples,
      },
      tasks: { target: targetTasks, others: otherTasks, control: controlTasks, from: baseline.from.toISOString(), to: tasksTo.toISOString() },
      target: {
        normalBeforePerSec: round((before.normal.get(targetId) ?? 0) / baselineSec, 2),
        normalDuringPerSec: round((during.normal.get(targetId) ?? 0) / burstSec, 2),
        priorityDuringPerSec: round((during.priority.get(targetId) ?? 0) / burstSec, 2),
      },
      others: otherRates,
      cpu: { baseline: baseline.cpu, burst: cpuOf(baseline.cpu, burstStart, burstEnd) },
    };
  } finally {
    await stack.close();
  }
}

/** CPU of the burst: from its two readings (the baseline's CPU when they cannot be compared). */
function cpuOf(fallback: CpuTimes, start: Reading, end: Reading): CpuTimes {
  const ms = end.at.getTime() - start.at.getTime();
  return ms > 0 ? cpuShares(start.cpu, end.cpu, ms) : fallback;
}

const timeoutsOf = (run: BurstRun): number =>
  run.tasks.target.workflowTaskTimeouts + run.tasks.others.workflowTaskTimeouts + run.tasks.control.workflowTaskTimeouts;
const failuresOf = (run: BurstRun): number =>
  run.tasks.target.workflowTaskFailures + run.tasks.others.workflowTaskFailures + run.tasks.control.workflowTaskFailures;

function verdicts(run: BurstRun): Verdict[] {
  const m = `(${run.schedulerLoop} loop)`;
  const d = run.drain;
  const lowest = run.others.reduce<AccountRates | undefined>((min, a) => (min === undefined || a.ratio < min.ratio ? a : min), undefined);
  const latest = run.others.reduce<AccountRates | undefined>(
    (max, a) => (max === undefined || a.latenessP99DuringMs > max.latenessP99DuringMs ? a : max),
    undefined,
  );
  const budgetNote = `${d.requestedCardCalls} calls of the requested cards at ${TARGET.qps.status} QPS take ${inSeconds(d.atBudgetMs)} (${BURST} ÷ budget: ${inSeconds((BURST / TARGET.qps.status!) * 1000)})`;
  return [
    none(
      `workflow task timeouts ${m}`,
      timeoutsOf(run),
      `target scheduler ${run.tasks.target.workflowTaskTimeouts}, other schedulers ${run.tasks.others.workflowTaskTimeouts}, pollingControl ` +
        `${run.tasks.control.workflowTaskTimeouts}; task failures ${failuresOf(run)} (target ${run.tasks.target.workflowTaskFailures}); from the baseline window's start to ${LOOP_WORKFLOW_TASK_TIMEOUT_MS / 1000 + 5} s after the last answer`,
    ),
    atMost(
      `longest gap between the target account's claim rounds during the burst ${m}`,
      run.gaps.burst.ms,
      ROUND_GAP_MAX_MS,
      inSeconds,
      `${run.gaps.burst.rounds} rounds, longest from ${run.gaps.burst.from?.slice(11, 23) ?? '?'}; seen late by at most ${inSeconds(run.gaps.sampleBoundMs)}; ` +
        `${run.gaps.crossCheck.source}: ${inSeconds(run.gaps.crossCheck.ms)}; before the burst ${inSeconds(run.gaps.baseline.ms)}`,
    ),
    d.ms === null
      ? {
          what: `priority lane drained (first request → every requested card called) ${m}`,
          figure: `not within ${inSeconds(d.limitMs)}`,
          target: `≤ ${inSeconds(d.atBudgetMs * DRAIN_OVER_BUDGET_MAX)}`,
          met: false,
          value: d.limitMs,
          limit: d.atBudgetMs * DRAIN_OVER_BUDGET_MAX,
          note: `${d.cardsCalled} of ${d.cardsRequested} cards called; ${budgetNote}`,
        }
      : atMost(
          `priority lane drained (first request → every requested card called) ${m}`,
          d.ms,
          d.atBudgetMs * DRAIN_OVER_BUDGET_MAX,
          inSeconds,
          `${budgetNote}; ${d.ratePerSec ?? '?'} calls/s; the account used ${d.budgetUsed === null ? '–' : `${round(d.budgetUsed * 100)} %`} of its budget`,
        ),
    lowest === undefined
      ? atLeast(`other accounts' checks/s during the burst ÷ before ${m}`, 0, OTHERS_SHARE_MIN, percent, 'no other account')
      : atLeast(
          `the slowest other account's checks/s during the burst ÷ before ${m}`,
          lowest.ratio,
          OTHERS_SHARE_MIN,
          percent,
          `${lowest.account}: ${perSecond(lowest.duringPerSec)} against ${perSecond(lowest.beforePerSec)} (offered ${perSecond(lowest.offeredPerSec)}); slowest ${BUCKET_MS / 1000} s bucket ${lowest.slowestBucketPerSec ?? '–'}/s`,
        ),
    atMost(
      `other accounts' lateness p99 during the burst ${m}`,
      latest?.latenessP99DuringMs ?? 0,
      OTHERS_LATENESS_P99_MS,
      inSeconds,
      latest === undefined ? 'no other account' : `${latest.account}; before the burst ${inSeconds(latest.latenessP99BeforeMs)}`,
    ),
    none(
      `request-checks answered with an error ${m}`,
      run.waves.reduce(
        (n, w) =>
          n +
          Object.entries(w.statuses)
            .filter(([s]) => s !== 'requested' && s !== 'cooldown')
            .reduce((k, [, c]) => k + c, 0),
        0,
      ),
      run.waves.map((w, i) => `wave ${i + 1}: ${JSON.stringify(w.statuses)}`).join('; '),
    ),
  ];
}

export const burst: Scenario = async (context) => {
  const seconds = windowSeconds(context, { warmupSec: 30, durationSec: 30 });
  const ceiling = await noopCeiling(context);
  const runs: BurstRun[] = [];
  for (const loop of context.options.schedulerLoops) runs.push(await burstRun(context, loop, seconds));
  const ms = (v: number | null): string => (v === null ? '–' : String(Math.round(v)));
  const tables: Table[] = [
    {
      headers: ['loop', 'wave', 'sent', 'statuses', 'answer p50 ms', 'answer p99 ms', 'sent in s'],
      numeric: [false, true, true, false, true, true, true],
      rows: runs.flatMap((run) =>
        run.waves.map((w, i) => [
          run.schedulerLoop,
          i + 1,
          w.sent,
          Object.entries(w.statuses)
            .map(([s, n]) => `${s} ${n}`)
            .join(', '),
          w.toAnswerMs.p50,
          w.toAnswerMs.p99,
          w.sendSeconds,
        ]),
      ),
    },
    {
      headers: [
        'loop',
        'drained after s',
        'at budget s (× 1.1)',
        'requested cards called',
        'their calls',
        'calls/s (budget)',
        'account calls (÷ budget)',
        'priority executions',
        'longest round gap s (burst)',
        'cross-check s',
        'before burst s',
        'WFT timeouts',
        'WFT failures',
        'target normal lane checks/s before → during',
      ],
      numeric: [false, true, false, false, true, false, false, true, true, true, true, true, true, false],
      rows: runs.map((run) => [
        run.schedulerLoop,
        run.drain.ms === null ? `> ${round(run.drain.limitMs / 1000)}` : round(run.drain.ms / 1000, 1),
        `${round(run.drain.atBudgetMs / 1000, 1)} (${round((run.drain.atBudgetMs * DRAIN_OVER_BUDGET_MAX) / 1000, 1)})`,
        `${run.drain.cardsCalled}/${run.drain.cardsRequested}`,
        run.drain.requestedCardCalls,
        `${run.drain.ratePerSec ?? '–'} (${TARGET.qps.status})`,
        `${run.drain.accountCalls} (${run.drain.budgetUsed === null ? '–' : `${round(run.drain.budgetUsed * 100)} %`})`,
        run.drain.priorityExecutions,
        round(run.gaps.burst.ms / 1000, 2),
        round(run.gaps.crossCheck.ms / 1000, 2),
        round(run.gaps.baseline.ms / 1000, 2),
        timeoutsOf(run),
        failuresOf(run),
        `${run.target.normalBeforePerSec} → ${run.target.normalDuringPerSec}`,
      ]),
    },
    {
      headers: [
        'loop',
        'other account',
        'offered/s',
        'checks/s before',
        'during the burst',
        'during ÷ before',
        `slowest ${BUCKET_MS / 1000} s bucket /s`,
        'lateness p99 ms before',
        'during',
      ],
      numeric: [false, false, true, true, true, true, true, true, true],
      rows: runs.flatMap((run) =>
        run.others.map((a) => [
          run.schedulerLoop,
          a.account,
          a.offeredPerSec,
          a.beforePerSec,
          a.duringPerSec,
          a.ratio,
          a.slowestBucketPerSec ?? '–',
          ms(a.latenessP99BeforeMs),
          ms(a.latenessP99DuringMs),
        ]),
      ),
    },
  ];
  const ceilingText = `${ceiling.workflowsPerSecond} no-activity workflows/s (${context.previous.has('ceiling') ? 'the ceiling scenario' : 'measured in this invocation'} at ${ceiling.date.slice(11, 19)})`;
  return {
    title: `${BURST} request-checks at once to one account (${TARGET.qps.status} QPS), twice: its claim rounds, the drain, the other accounts`,
    explain: [
      `Per scheduler loop (SCHEDULER_LOOP, CARD_RUN_SHAPE=batch, client starts; a fresh stack each): the target account, ${TARGET.cards} cards polled ` +
        `(card_status every ${TARGET.intervalsSec.card_status} s, ${round(TARGET.cards / (TARGET.intervalsSec.card_status ?? 1), 2)} checks/s) on a ${TARGET.qps.status}-QPS budget; ` +
        `${OTHERS.length} other accounts of ${OTHERS[0]?.cards} cards every ${OTHERS[0]?.intervalsSec.card_status} s (${round((OTHERS[0]?.cards ?? 0) / (OTHERS[0]?.intervalsSec.card_status ?? 1), 2)} checks/s each) on ${OTHERS[0]?.qps.status} QPS; ` +
        `first dues spread over each interval, gateway latency p50 ${TARGET.latencyMs.p50} ms. Warm-up ${seconds.warmupSec} s, then a baseline window of ${seconds.durationSec} s.`,
      `The burst: ${BURST} request-checks of distinct cards of the target account (every other card of its fleet), ${CONCURRENCY} concurrent, served as the API serves ` +
        `them (src/app/requestCheckService.ts: the scheduler's run checked, the service, a wake for a workflow loop only); once all are answered, the same ${BURST} again.`,
      `Drained: from the first request to the last requested card's first gateway call at or after its latest request (the simulator's per-card stamp, read every ` +
        `${WATCH_EVERY_MS} ms; waited for up to ${DRAIN_LIMIT_FACTOR}× ${BURST} ÷ budget). At budget: the calls the requested cards took in that time ` +
        `(${BURST} and those the second wave asked again, the simulator's per-card counts) ÷ the budget; target ≤ ${DRAIN_OVER_BUDGET_MAX}× that.`,
      `Round gaps: the round time the claim round stamps in ${ROUND_GAP_METRIC} (both loops; this process's registry) read every ${SAMPLE_EVERY_MS} ms — ` +
        'a gap is seen late by at most the longest interval between two reads (reported), never early; gaps overlapping the burst (first request to drained), the last round to its end included. ' +
        "Cross-check: the activity loop's published status view (its round counter, seen to change) or the workflow loop's claimRound markers.",
      `Workflow task timeouts and failures: WorkflowTaskTimedOut / WorkflowTaskFailed events of the target's and the other accounts' schedulers and pollingControl, every run, from the baseline's ` +
        `start to ${LOOP_WORKFLOW_TASK_TIMEOUT_MS / 1000 + 5} s after the last answer (a task times out ${LOOP_WORKFLOW_TASK_TIMEOUT_MS / 1000} s after it started).`,
      `Other accounts: executions started (card_execution) per second in the baseline window and during the burst, their slowest full ${BUCKET_MS / 1000} s bucket during it, ` +
        'and lateness p99 (start − earliest due) in each; a pause followed by a catch-up shows in the bucket and the lateness, not in the mean.',
    ],
    config: {
      ...seconds,
      schedulerLoops: context.options.schedulerLoops.join(','),
      runShape: 'batch',
      burst: BURST,
      concurrency: CONCURRENCY,
      waves: WAVES,
      targetQps: TARGET.qps.status,
      targetCards: TARGET.cards,
      targetIntervalSec: TARGET.intervalsSec.card_status,
      otherAccounts: OTHERS.length,
      ceilingWorkflowsPerSecond: ceiling.workflowsPerSecond,
    },
    results: { ceiling, runs },
    tables,
    verdicts: runs.flatMap(verdicts),
    notes: [
      `Ceiling of this run: ${ceilingText}. The load: ${round(TARGET.cards / (TARGET.intervalsSec.card_status ?? 1) + OTHERS.reduce((n, a) => n + a.cards / (a.intervalsSec.card_status ?? 1), 0), 1)} checks/s offered plus the burst's ${TARGET.qps.status}/s, batch runs: a small share of it.`,
      ...runs.flatMap((run) => [
        `${run.schedulerLoop} loop: the other accounts ran ${round(
          run.others.reduce((n, a) => n + a.duringPerSec, 0),
          1,
        )} checks/s during the burst (${round(
          run.others.reduce((n, a) => n + a.beforePerSec, 0),
          1,
        )} before) and the burst drained at ${run.drain.ratePerSec ?? '–'} calls/s, beside the ceiling's ${ceiling.workflowsPerSecond} workflows/s; ` +
          `the target's normal lane ${run.target.normalBeforePerSec} checks/s before, ${run.target.normalDuringPerSec} during, priority ${run.target.priorityDuringPerSec}/s: ` +
          `the target's priority ratio is ${TARGET.priorityRatio ?? 'the default'}: the priority lane takes whole rounds (lua/claim.lua, step 3) and its normal lane waits for the burst ` +
          `(a ratio above 0 keeps that share of each round for a normal lane with cards due, and drains slower). The account called ${run.drain.budgetUsed === null ? '–' : `${round(run.drain.budgetUsed * 100)} %`} of its budget while draining; ` +
          `its rounds were held back by (samples of the limited-by gauge) ${JSON.stringify(run.drain.limitedBy)}.`,
        `${run.schedulerLoop} loop: round samples ${run.gaps.samples}, ${run.gaps.idleSamples} of them with the loop view idle; workflow task failures by cause — target ${JSON.stringify(run.tasks.target.workflowTaskFailureCauses)}, ` +
          `others ${JSON.stringify(run.tasks.others.workflowTaskFailureCauses)}, pollingControl ${JSON.stringify(run.tasks.control.workflowTaskFailureCauses)}; target scheduler's workflow tasks in the window ${run.tasks.target.workflowTasks}.`,
        `${run.schedulerLoop} loop, baseline: ${cpuNote(run.cpu.baseline)}`,
        `${run.schedulerLoop} loop, burst: ${cpuNote(run.cpu.burst)}`,
      ]),
    ],
  };
};
