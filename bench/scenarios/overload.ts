/**
 * overload (README.md, 'Claiming bounded by the engine'; docs/design.md, 'In-flight limit'): cards
 * due at twice the orchestration capacity measured in this invocation, for 10 minutes per start mode
 * (CARD_START_MODE child and client, card run shape), with request-checks throughout. The engine,
 * not the budget, is the limit: each account's budget is 2.5 × its share of the capacity and its
 * cards ask for 0.8 of it. Reported per start mode:
 *
 * - the longest gap between two claim rounds of any scheduler, from the `claimRound` markers of
 *   every scheduler run (continue-as-new included: bench/lib/schedulerRounds.ts);
 * - workflow task failures and timeouts in the schedulers', pollingControl's and a sample of card
 *   runs' histories;
 * - expired leases (the lease-expiry counter and the schedulers' status), calls the simulator
 *   rejected;
 * - request-check → first gateway call (the simulator's per-card last-call time);
 * - each account's share of the executions against its share of the budgets;
 * - RSS of this process (workers + bench), the simulator's process and the Temporal server, and
 *   whether each levels off.
 */
import { cardWorkflowId, pollingControlWorkflowId, schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import type { ScopedCard } from '../../src/domain/card.js';
import { windowSeconds, type Scenario, type ScenarioContext } from '../lib/context.js';
import { createBenchStack, type BenchStack } from '../lib/stack.js';
import { seedAccount, spreadDues, type AccountSpec, type SeededAccount } from '../lib/seed.js';
import { cpuNote, leaseExpiries, measureWindow } from '../lib/window.js';
import { latenessBetween } from '../lib/measure.js';
import { servicePidsFor, usesTemporalCluster, type CpuTimes } from '../lib/processes.js';
import { capacityNote, orchestrationCapacity, type Capacity } from '../lib/capacity.js';
import { schedulerSnapshots, type SchedulerSnapshot } from '../lib/cardExecutions.js';
import { schedulerRounds, type PriorityClaim, type SchedulerRounds } from '../lib/schedulerRounds.js';
import { settledExecutionsBetween } from '../lib/checkCost.js';
import { addCounts, countEvents, emptyCounts, eventsInWindow, fetchEvents, type EventCounts } from '../lib/actions.js';
import { RSS_RULE, rssTrends, sampleRss, type HeapFigures, type HeapSource, type RssTrend } from '../lib/rss.js';
import { workerThreadHeaps } from '../lib/isolateHeaps.js';
import { readGoHeap } from '../lib/goHeap.js';
import { parseHostPort } from '../../devstack/temporal.js';
import type { StartMode } from '../lib/options.js';
import type { Table } from '../lib/report.js';
import { distribution, round, sleep, type Distribution } from '../lib/stats.js';
import { atMost, none, notChecked, seconds as inSeconds, type Verdict } from '../lib/verdict.js';
import { addRequestCards, sendRequests, watchFirstCalls, type Pending } from './priority.js';
import { processMemory, watchLiveHeap } from '../../src/runtime/liveHeap.js';
import { getHeapStatistics } from 'node:v8';

const DEFAULT_WINDOW_SEC = 600;
const INTERVAL_SEC = 10;
/** Cards due ÷ measured capacity. */
const OFFERED = 2;
/** Budgets ÷ their share of the capacity: the cards (OFFERED ÷ this = 0.8 of each budget) never meet the budget. */
const BUDGET_OVER_CAPACITY = 2.5;
/** Budget weights of the accounts: their shares of a saturated engine should follow these. */
const WEIGHTS: readonly { readonly name: string; readonly weight: number }[] = [
  { name: 'ov1', weight: 1 },
  { name: 'ov2', weight: 2 },
  { name: 'ov4', weight: 4 },
];
const LATENCY = { p50: 5, p99: 20 };
/** Card runs whose histories are read for workflow task failures and timeouts. */
const CARD_RUN_SAMPLE = 50;
/** How often the requested cards' last-call times are read (the time is the simulator's stamp; requested cards are otherwise polled daily). */
const WATCH_EVERY_MS = 1000;
const RSS_EVERY_MS = 10_000;
/** Requests still unanswered this long after the window are reported as unanswered. */
const DRAIN_MS = 15_000;

/** Targets with the engine as the limit: no claim-round stall longer than this, the priority lane still fast. */
const ROUND_GAP_MAX_MS = 3000;
const PRIORITY_P99_MAX_MS = 2000;
/** An account's share of the executions ÷ its share of the budgets: within 1 ± this. */
const SHARE_TOLERANCE = 0.1;

interface AccountFigures {
  readonly account: string;
  readonly carrierId: string;
  readonly budgetQps: number;
  readonly budgetShare: number;
  readonly cards: number;
  readonly executions: number;
  readonly share: number;
  readonly shareOverBudgetShare: number;
  readonly latenessP99Ms: number;
  readonly rounds: Omit<SchedulerRounds, 'priorityClaims'>;
  /** The scheduler's adaptive in-flight limit and smoothed start lag, means of the window's samples. */
  readonly meanInflightLimit: number | null;
  readonly meanStartLagMs: number | null;
  readonly meanQueueLagMs: number | null;
  /** Samples with a fair rate (engine shared and saturated), and the mean of starts/s ÷ fair rate over them. */
  readonly fairRateSamples: number;
  readonly meanOverFairRate: number | null;
  /** What held its claim rounds back, per sample. */
  readonly limitedBy: Record<string, number>;
}

/**
 * Where a request-check's time goes, each stage from the requests that reached it: the request to
 * its card run's start (the scheduler's claim and the start call; the run's StartTime) — split at
 * the request's answer (the card is in the priority lane then; the rest is the claim) — the run's
 * start to its execution's start (card_execution.started_at: the engine dispatching the run's
 * first tasks), the execution's start to the first gateway call (the gateway activity's dispatch
 * and the rate limiter).
 */
interface RequestStages {
  readonly toAnswerMs: Distribution;
  readonly answerToRunStartMs: Distribution;
  /** The answer to the card's claim from the priority lane (the claim's instant, from its token): the scheduler's wake and round. */
  readonly answerToClaimMs: Distribution;
  /** That claim to the run's start: the start call (client) or the child start through the scheduler's history. */
  readonly claimToRunStartMs: Distribution;
  readonly toRunStartMs: Distribution;
  readonly runStartToExecutionMs: Distribution;
  readonly executionToCallMs: Distribution;
}

interface OverloadRun {
  readonly startMode: StartMode;
  readonly capacity: Capacity;
  readonly offeredPerSecond: number;
  readonly windowSeconds: number;
  readonly executions: number;
  readonly executionsPerSecond: number;
  readonly accounts: AccountFigures[];
  readonly longestGap: { readonly ms: number; readonly account: string; readonly from: string | null };
  readonly schedulerCounts: EventCounts;
  readonly controlCounts: EventCounts;
  readonly cardRunCounts: EventCounts & { readonly runsRead: number };
  readonly expiredLeases: { readonly inWindow: number; readonly wholeRun: number; readonly schedulerStatus: number };
  readonly rejected: number;
  /** Per group that refused calls: its busiest second's arrivals (see {@link rejectionDetails}). */
  readonly rejections: readonly string[];
  readonly requests: {
    readonly sent: number;
    readonly requested: number;
    readonly answered: number;
    readonly toFirstCallMs: Distribution;
    readonly stages: RequestStages;
    readonly statuses: Record<string, number>;
  };
  readonly rss: RssTrend[];
  readonly cpuShares: CpuTimes;
}

function specs(capacityPerSecond: number): AccountSpec[] {
  const totalWeight = WEIGHTS.reduce((n, w) => n + w.weight, 0);
  const budgets = WEIGHTS.map((w) => ({ name: w.name, qps: Math.max(1, Math.round((BUDGET_OVER_CAPACITY * capacityPerSecond * w.weight) / totalWeight)) }));
  const budgetTotal = budgets.reduce((n, b) => n + b.qps, 0);
  return budgets.map((b) => ({
    name: b.name,
    qps: { status: b.qps },
    typeGroups: { card_status: 'status' },
    // Due at OFFERED × capacity in all, split by budget.
    cards: Math.max(1, Math.round(((OFFERED * capacityPerSecond * b.qps) / budgetTotal) * INTERVAL_SEC)),
    intervalsSec: { card_status: INTERVAL_SEC },
    latencyMs: LATENCY,
  }));
}

/** Executions per account in the window, the normal lane only (the budget shares are the normal lane's). */
async function executionsByAccount(stack: BenchStack, from: Date, to: Date): Promise<Map<string, number>> {
  const { rows } = await stack.pool.query<{ carrier_id: string; n: string }>(
    `SELECT carrier_id::text, count(*)::text AS n FROM card_execution
      WHERE started_at >= $1 AND started_at < $2 AND NOT from_priority GROUP BY 1`,
    [from, to],
  );
  return new Map(rows.map((row) => [row.carrier_id, Number(row.n)]));
}

/** Workflow task failures and timeouts in a sample of the window's card runs. */
async function cardRunCounts(stack: BenchStack, from: Date, to: Date): Promise<EventCounts & { runsRead: number }> {
  const { rows } = await stack.pool.query<{ workflow_id: string; run_id: string }>(
    `SELECT workflow_id, run_id FROM (SELECT DISTINCT workflow_id, run_id FROM card_execution WHERE started_at >= $1 AND started_at < $2) runs
      ORDER BY random() LIMIT $3`,
    [from, to, CARD_RUN_SAMPLE],
  );
  const counts = emptyCounts();
  for (const row of rows) countEvents(await fetchEvents(stack.client.workflow.getHandle(row.workflow_id, row.run_id)), counts);
  return { ...counts, runsRead: rows.length };
}

async function requestStages(stack: BenchStack, requested: readonly Pending[], priorityClaims: readonly PriorityClaim[]): Promise<RequestStages> {
  const { rows } = await stack.pool.query<{ card_id: string; started_at: Date }>(
    'SELECT card_id::text, started_at FROM card_execution WHERE from_priority AND card_id = ANY($1::bigint[]) ORDER BY started_at',
    [requested.map((p) => p.card.id)],
  );
  const toAnswer: number[] = [];
  const answerToRunStart: number[] = [];
  const answerToClaim: number[] = [];
  const claimToRunStart: number[] = [];
  const toRunStart: number[] = [];
  const runToExecution: number[] = [];
  const executionToCall: number[] = [];
  for (const p of requested) {
    // The requested cards are otherwise polled daily: the first run started after the request is the request's.
    let runStart: number | undefined;
    const query = `WorkflowId = "${cardWorkflowId(p.card.id, stack.ref.workflowIdPrefix)}"`;
    for await (const run of stack.client.workflow.list({ query })) {
      const at = run.startTime.getTime();
      if (at >= p.requestedAt && (runStart === undefined || at < runStart)) runStart = at;
    }
    const executionStart = rows.find((r) => r.card_id === p.card.id && r.started_at.getTime() >= p.requestedAt - 5)?.started_at.getTime();
    if (runStart !== undefined) toRunStart.push(runStart - p.requestedAt);
    if (p.answeredAt !== undefined) toAnswer.push(p.answeredAt - p.requestedAt);
    if (p.answeredAt !== undefined && runStart !== undefined) answerToRunStart.push(runStart - p.answeredAt);
    // The request's claim: the first of the card from the priority lane at or after the request.
    const claimedAt = priorityClaims
      .filter((claim) => claim.cardId === p.card.id && claim.claimedAt >= p.requestedAt)
      .reduce<number | undefined>((first, claim) => (first === undefined || claim.claimedAt < first ? claim.claimedAt : first), undefined);
    if (claimedAt !== undefined && p.answeredAt !== undefined) answerToClaim.push(claimedAt - p.answeredAt);
    if (claimedAt !== undefined && runStart !== undefined) claimToRunStart.push(runStart - claimedAt);
    if (runStart !== undefined && executionStart !== undefined) runToExecution.push(executionStart - runStart);
    if (executionStart !== undefined && p.firstCallAt !== undefined) executionToCall.push(p.firstCallAt - executionStart);
  }
  return {
    toAnswerMs: distribution(toAnswer),
    answerToRunStartMs: distribution(answerToRunStart),
    answerToClaimMs: distribution(answerToClaim),
    claimToRunStartMs: distribution(claimToRunStart),
    toRunStartMs: distribution(toRunStart),
    runStartToExecutionMs: distribution(runToExecution),
    executionToCallMs: distribution(executionToCall),
  };
}

/** Most of the sorted `times` within `windowMs`. */
function densestWithin(sorted: readonly number[], windowMs: number): number {
  let most = 0;
  let start = 0;
  for (let end = 0; end < sorted.length; end += 1) {
    while (sorted[end]! - sorted[start]! > windowMs) start += 1;
    most = Math.max(most, end - start + 1);
  }
  return most;
}

/**
 * Where the simulator refused calls: per group, its busiest second's arrivals as offsets from the
 * first (ms, as its handler read them) and the most of them within 5 ms. A tight bunch says its
 * event loop read calls late (it shares the machine's two cores); arrivals spread over the second
 * say the calls were sent too close together.
 */
async function rejectionDetails(stack: BenchStack, accounts: readonly SeededAccount[]): Promise<string[]> {
  const stats = await stack.simulator.stats({ cards: false });
  const lines: string[] = [];
  for (const account of accounts) {
    for (const [group, g] of Object.entries(stats.accounts[account.gatewayAccount]?.groups ?? {})) {
      if (g.rejected === 0) continue;
      const arrivals = g.busiestSecond.map((call) => call.arrivedAtMs).sort((a, b) => a - b);
      const first = arrivals[0] ?? 0;
      lines.push(
        `${account.spec.name} ${group}: ${g.rejected} of ${g.calls + g.rejected}; busiest second ${g.maxPerSecond} arrivals (accepted ≤ ${g.maxAcceptedPerSecond} per second), ` +
          `at +ms ${arrivals.map((at) => Math.round(at - first)).join(' ')}; most within 5 ms: ${densestWithin(arrivals, 5)}`,
      );
    }
  }
  return lines;
}

/** Samples the schedulers' status (adaptive limit, start lag, what limits their rounds) until stopped. */
function sampleControllers(stack: BenchStack, carrierIds: readonly string[], everyMs: number): { stop: () => Promise<SchedulerSnapshot[]> } {
  const samples: SchedulerSnapshot[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      samples.push(...(await schedulerSnapshots(stack, carrierIds)));
      for (let waited = 0; running && waited < everyMs; waited += 250) await sleep(250);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return samples;
    },
  };
}

const meanRatio = (values: readonly number[]): number | null => (values.length === 0 ? null : round(values.reduce((a, b) => a + b, 0) / values.length, 3));
const mean = (values: readonly number[]): number | null => (values.length === 0 ? null : round(values.reduce((a, b) => a + b, 0) / values.length, 1));

async function overloadRun(context: ScenarioContext, startMode: StartMode, seconds: { warmupSec: number; durationSec: number }): Promise<OverloadRun> {
  const log = (line: string): void => context.log(`${startMode}: ${line}`);
  const capacity = await orchestrationCapacity(context, { startMode, runShape: 'card' });
  const accountSpecs = specs(capacity.perSecond);
  const offered = accountSpecs.reduce((n, spec) => n + spec.cards, 0) / INTERVAL_SEC;
  log(
    `capacity ${capacity.perSecond}/s → ${round(offered, 1)} checks/s due (${OFFERED}×), budgets ` +
      accountSpecs.map((spec) => `${spec.name} ${spec.qps.status} QPS`).join(', '),
  );
  const stack = await createBenchStack(context.config, `overload-${startMode}`, { cardStartMode: startMode, cardRunShape: 'card' });
  try {
    const accounts: SeededAccount[] = [];
    for (const spec of accountSpecs) accounts.push(await seedAccount(stack, spec));
    for (const account of accounts) await spreadDues(stack, account, 'card_status', INTERVAL_SEC * 1000);
    const rate = context.options.requestRate;
    const perAccount = Math.ceil((rate * seconds.durationSec) / accounts.length) + 2;
    const pools: { carrierId: string; cards: ScopedCard[] }[] = [];
    for (const account of accounts) pools.push({ carrierId: account.carrier.id, cards: await addRequestCards(stack, account, perAccount) });
    await stack.startOrchestration();
    const sent: Pending[] = [];
    const answers: Promise<void>[] = [];
    let rss: ReturnType<typeof sampleRss> | undefined;
    let watcher: ReturnType<typeof watchFirstCalls> | undefined;
    let controllers: ReturnType<typeof sampleControllers> | undefined;
    const window = await measureWindow(stack, seconds, log, async (until) => {
      // From the window's start: RSS at start and end of the measured overload, request-checks throughout.
      watchLiveHeap();
      rss = sampleRss(
        {
          'bench + workers': () => [process.pid],
          simulator: () => [stack.simulator.pid],
          'Temporal server': () => servicePidsFor(stack.config).temporal,
        },
        RSS_EVERY_MS,
        {
          'bench + workers': () => Promise.resolve(workersProcessHeaps()),
          simulator: async () => ({ liveBytes: (await stack.simulator.stats({ cards: false })).process?.liveBytes ?? null }),
          ...temporalHeapSource(stack),
        },
      );
      watcher = watchFirstCalls(stack, sent, WATCH_EVERY_MS);
      controllers = sampleControllers(
        stack,
        accounts.map((a) => a.carrier.id),
        RSS_EVERY_MS,
      );
      await sendRequests(stack, pools, rate, until, sent, answers);
    });
    const rssSamples = (await rss?.stop()) ?? [];
    const controllerSamples = (await controllers?.stop()) ?? [];
    await Promise.all(answers);
    const drainUntil = Date.now() + DRAIN_MS;
    while (Date.now() < drainUntil && sent.some((p) => p.status === 'requested' && p.firstCallAt === undefined)) await sleep(200);
    await watcher?.stop();
    log('reading histories');

    // Executions still running at the window's end record their rows later.
    await settledExecutionsBetween(stack.pool, window.from, window.to);
    const byAccount = await executionsByAccount(stack, window.from, window.to);
    const executions = [...byAccount.values()].reduce((a, b) => a + b, 0);
    const budgetTotal = accounts.reduce((n, a) => n + (a.spec.qps.status ?? 0), 0);
    const figures: AccountFigures[] = [];
    const priorityClaims: PriorityClaim[] = [];
    for (const account of accounts) {
      const id = account.carrier.id;
      const n = byAccount.get(id) ?? 0;
      const budgetShare = (account.spec.qps.status ?? 0) / budgetTotal;
      const share = executions > 0 ? n / executions : 0;
      const lateness = await latenessBetween(stack.pool, window.from, window.to, `carrier_id = ${Number(id)} AND NOT from_priority`);
      const own = controllerSamples.filter((sample) => sample.carrierId === id);
      const limitedBy: Record<string, number> = {};
      // Its priority claims are only for the request stages (not kept in the results).
      const { priorityClaims: claims, ...rounds } = await schedulerRounds(
        stack.client,
        schedulerWorkflowId(id, stack.ref.workflowIdPrefix),
        window.from,
        window.to,
      );
      priorityClaims.push(...claims);
      for (const sample of own) limitedBy[sample.limitedBy] = (limitedBy[sample.limitedBy] ?? 0) + 1;
      figures.push({
        account: account.spec.name,
        carrierId: id,
        budgetQps: account.spec.qps.status ?? 0,
        budgetShare: round(budgetShare, 3),
        cards: account.cards.length,
        executions: n,
        share: round(share, 3),
        shareOverBudgetShare: round(budgetShare > 0 ? share / budgetShare : 0, 3),
        latenessP99Ms: lateness.latenessMs.p99,
        rounds,
        meanInflightLimit: mean(own.map((sample) => sample.inflightLimit)),
        meanStartLagMs: mean(own.map((sample) => sample.startLagMs)),
        meanQueueLagMs: mean(own.flatMap((sample) => (sample.queueLagMs === null ? [] : [sample.queueLagMs]))),
        fairRateSamples: own.filter((sample) => sample.fairRatePerSec !== null).length,
        meanOverFairRate: meanRatio(own.flatMap((sample) => (sample.fairRatePerSec ? [sample.startsPerSec / sample.fairRatePerSec] : []))),
        limitedBy,
      });
    }
    const longest = figures.reduce((max, f) => (f.rounds.longestGapMs > max.rounds.longestGapMs ? f : max), figures[0]!);
    const schedulerCounts = figures.reduce((sum, f) => addCounts(sum, f.rounds.counts), emptyCounts());
    const controlCounts = countEvents(await eventsInWindow(stack.client, pollingControlWorkflowId(stack.ref.workflowIdPrefix), window.from, window.to));
    const cards = await cardRunCounts(stack, window.from, window.to);
    const statusExpired = (
      await schedulerSnapshots(
        stack,
        accounts.map((a) => a.carrier.id),
      )
    ).reduce((n, s) => n + s.expiredLeases, 0);
    let rejected = 0;
    for (const account of accounts) for (const group of Object.values(window.end.calls[account.gatewayAccount] ?? {})) rejected += group.rejected;
    const rejections = rejected === 0 ? [] : await rejectionDetails(stack, accounts);
    const requested = sent.filter((p) => p.status === 'requested');
    const answered = requested.filter((p) => p.firstCallAt !== undefined);
    const statuses: Record<string, number> = {};
    for (const p of sent) statuses[p.status ?? 'no answer'] = (statuses[p.status ?? 'no answer'] ?? 0) + 1;
    return {
      startMode,
      capacity,
      offeredPerSecond: round(offered, 1),
      windowSeconds: round(window.seconds),
      executions,
      executionsPerSecond: round(executions / window.seconds, 1),
      accounts: figures,
      longestGap: { ms: longest.rounds.longestGapMs, account: longest.account, from: longest.rounds.longestGapFrom },
      schedulerCounts,
      controlCounts,
      cardRunCounts: cards,
      expiredLeases: { inWindow: leaseExpiries(window.end) - leaseExpiries(window.start), wholeRun: leaseExpiries(window.end), schedulerStatus: statusExpired },
      rejected,
      rejections,
      requests: {
        sent: sent.length,
        requested: requested.length,
        answered: answered.length,
        toFirstCallMs: distribution(answered.map((p) => p.firstCallAt! - p.requestedAt)),
        stages: await requestStages(stack, requested, priorityClaims),
        statuses,
      },
      // The simulator's memory is its heap's; the workers' process and the server have memory outside theirs.
      rss: rssTrends(rssSamples, ['simulator']),
      cpuShares: window.cpu,
    };
  } finally {
    await stack.close();
  }
}

const stageText = (d: Distribution): string => `${d.p50} / ${d.p99} (${d.n})`;
const signed = (mb: number): string => `${mb >= 0 ? '+' : '−'}${Math.abs(mb)}`;
const failuresOf = (run: OverloadRun): number =>
  run.schedulerCounts.workflowTaskFailures + run.controlCounts.workflowTaskFailures + run.cardRunCounts.workflowTaskFailures;
const timeoutsOf = (run: OverloadRun): number =>
  run.schedulerCounts.workflowTaskTimeouts + run.controlCounts.workflowTaskTimeouts + run.cardRunCounts.workflowTaskTimeouts;
const expiredOf = (run: OverloadRun): number => Math.max(run.expiredLeases.wholeRun, run.expiredLeases.schedulerStatus);

function verdicts(run: OverloadRun): Verdict[] {
  const m = `(${run.startMode})`;
  const out: Verdict[] = [
    atMost(
      `longest gap between two claim rounds of any scheduler ${m}`,
      run.longestGap.ms,
      ROUND_GAP_MAX_MS,
      inSeconds,
      `${run.longestGap.account}${run.longestGap.from ? ` from ${run.longestGap.from.slice(11, 23)}` : ''}; ${run.accounts.reduce((n, a) => n + a.rounds.continuedAsNew, 0)} continue-as-new in the window`,
    ),
    none(
      `workflow task timeouts ${m}`,
      timeoutsOf(run),
      `schedulers ${run.schedulerCounts.workflowTaskTimeouts}, pollingControl ${run.controlCounts.workflowTaskTimeouts}, ` +
        `${run.cardRunCounts.runsRead} card runs read ${run.cardRunCounts.workflowTaskTimeouts}; task failures ${failuresOf(run)}`,
    ),
    none(
      `expired leases ${m} (whole run)`,
      expiredOf(run),
      `lease-expiry counter ${run.expiredLeases.wholeRun} (${run.expiredLeases.inWindow} in the window), schedulers' status ${run.expiredLeases.schedulerStatus}`,
    ),
    none(`calls rejected by the simulator ${m} (whole run)`, run.rejected),
  ];
  const p = run.requests.toFirstCallMs;
  out.push(
    run.requests.answered === 0
      ? notChecked(`request-check → first gateway call p99 ${m}`, `≤ ${inSeconds(PRIORITY_P99_MAX_MS)}`, 'no request was answered')
      : atMost(
          `request-check → first gateway call p99 ${m}`,
          p.p99,
          PRIORITY_P99_MAX_MS,
          inSeconds,
          `${p.n} of ${run.requests.requested} requests reached the gateway within ${DRAIN_MS / 1000} s after the window`,
        ),
  );
  for (const a of run.accounts) {
    const met = Math.abs(a.shareOverBudgetShare - 1) <= SHARE_TOLERANCE;
    out.push({
      what: `${a.account} share of executions ÷ its budget share ${m}`,
      figure: `${a.shareOverBudgetShare}×`,
      target: `${1 - SHARE_TOLERANCE}–${1 + SHARE_TOLERANCE}×`,
      met: run.executions > 0 ? met : null,
      value: a.shareOverBudgetShare,
      limit: SHARE_TOLERANCE,
      note: `${round(a.share * 100, 1)} % of ${run.executions} executions against ${round(a.budgetShare * 100, 1)} % of the budgets`,
    });
  }
  for (const r of run.rss) {
    out.push({
      what: `RSS of ${r.process} levels off ${m}`,
      figure:
        `${r.startMb} → ${r.middleMb} → ${r.endMb} MB (${signed(r.firstHalfMb)} then ${signed(r.secondHalfMb)})` +
        (r.live ? `; live ${r.live.startMb} → ${r.live.middleMb} → ${r.live.endMb} MB (${signed(r.live.secondHalfMb)} in the second half)` : '') +
        (r.outsideHeaps
          ? `; outside the heaps ${r.outsideHeaps.startMb} → ${r.outsideHeaps.middleMb} → ${r.outsideHeaps.endMb} MB (${signed(r.outsideHeaps.firstHalfMb)} then ${signed(r.outsideHeaps.secondHalfMb)})`
          : ''),
      target: `levels off (second half against first half, see above; decided by ${r.decidedBy})`,
      met: r.samples >= 3 ? r.levelsOff : null,
      value: r.secondHalfMb,
      ...(r.samples >= 3 ? {} : { note: `only ${r.samples} samples: the window is too short to tell` }),
    });
  }
  return out;
}

/**
 * This process: its own heap as kept after its latest major collection plus its worker threads'
 * (the SDK's workflow threads) old generations in use; the heaps it holds are all of them.
 */
function workersProcessHeaps(): HeapFigures {
  const own = processMemory();
  const threads = workerThreadHeaps();
  return {
    liveBytes: own.liveBytes === null ? null : own.liveBytes + threads.usedBytes,
    heapBytes: getHeapStatistics().total_physical_size + threads.physicalBytes,
  };
}

/** The dev server's Go heap from its fixed metrics port (none for the local cluster or a server started without one). */
function temporalHeapSource(stack: BenchStack): Record<string, HeapSource> {
  const port = stack.config.TEMPORAL_DEV_METRICS_PORT;
  if (port === 0 || usesTemporalCluster(stack.config)) return {};
  const url = `http://${parseHostPort(stack.config.TEMPORAL_ADDRESS).host}:${port}/metrics`;
  return {
    'Temporal server': async () => {
      const heap = await readGoHeap(url);
      return heap ? { liveBytes: heap.allocatedBytes, heapBytes: heap.heldBytes } : null;
    },
  };
}

export const overload: Scenario = async (context) => {
  const base = windowSeconds(context, { warmupSec: INTERVAL_SEC + 10, durationSec: DEFAULT_WINDOW_SEC });
  const seconds = { ...base, durationSec: context.options.overloadDurationSec ?? base.durationSec };
  const runs: OverloadRun[] = [];
  for (const startMode of context.options.startModes) runs.push(await overloadRun(context, startMode, seconds));
  const tables: Table[] = [
    {
      headers: [
        'start',
        'capacity/s',
        'due/s',
        'checks/s',
        'longest round gap s',
        'gaps > 3 s',
        'continue-as-new',
        'WFT failures',
        'WFT timeouts',
        'expired leases',
        'rejected calls',
        'request → call p50 ms',
        'p99 ms',
        'answered',
      ],
      numeric: [false, true, true, true, true, true, true, true, true, true, true, true, true, false],
      rows: runs.map((run) => [
        run.startMode,
        run.capacity.perSecond,
        run.offeredPerSecond,
        run.executionsPerSecond,
        round(run.longestGap.ms / 1000, 2),
        run.accounts.reduce((n, a) => n + (a.rounds.gapsOverMs['3000'] ?? 0), 0),
        run.accounts.reduce((n, a) => n + a.rounds.continuedAsNew, 0),
        failuresOf(run),
        timeoutsOf(run),
        expiredOf(run),
        run.rejected,
        run.requests.toFirstCallMs.p50,
        run.requests.toFirstCallMs.p99,
        `${run.requests.answered}/${run.requests.requested}`,
      ]),
    },
    {
      headers: [
        'start',
        'account',
        'budget QPS',
        'budget share',
        'checks',
        'share',
        'share ÷ budget share',
        'claim rounds',
        'longest gap s',
        'continue-as-new',
        'scheduler WFT failures',
        'scheduler WFT timeouts',
        'lateness p99 s',
        'mean in-flight limit',
        'mean start lag ms',
        'mean queue lag ms',
        'fair rate samples',
        'mean starts ÷ fair rate',
        'limited by (samples)',
      ],
      numeric: [false, false, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, false],
      rows: runs.flatMap((run) =>
        run.accounts.map((a) => [
          run.startMode,
          a.account,
          a.budgetQps,
          a.budgetShare,
          a.executions,
          a.share,
          a.shareOverBudgetShare,
          a.rounds.rounds,
          round(a.rounds.longestGapMs / 1000, 2),
          a.rounds.continuedAsNew,
          a.rounds.counts.workflowTaskFailures,
          a.rounds.counts.workflowTaskTimeouts,
          round(a.latenessP99Ms / 1000, 1),
          a.meanInflightLimit ?? '—',
          a.meanStartLagMs ?? '—',
          a.meanQueueLagMs ?? '—',
          a.fairRateSamples,
          a.meanOverFairRate === null ? '—' : round(a.meanOverFairRate, 2),
          Object.entries(a.limitedBy)
            .map(([why, n]) => `${why} ${n}`)
            .join(', ') || '—',
        ]),
      ),
    },
    {
      headers: [
        'start',
        'process',
        'samples',
        'start MB',
        'middle MB',
        'end MB',
        'first half Δ MB',
        'second half Δ MB',
        'live MB (start → middle → end)',
        'outside the heaps MB (start → middle → end)',
        'levels off',
      ],
      numeric: [false, false, true, true, true, true, true, true, false, false, false],
      rows: runs.flatMap((run) =>
        run.rss.map((r) => [
          run.startMode,
          r.process,
          r.samples,
          r.startMb,
          r.middleMb,
          r.endMb,
          r.firstHalfMb,
          r.secondHalfMb,
          r.live ? `${r.live.startMb} → ${r.live.middleMb} → ${r.live.endMb}` : '—',
          r.outsideHeaps ? `${r.outsideHeaps.startMb} → ${r.outsideHeaps.middleMb} → ${r.outsideHeaps.endMb}` : '—',
          `${r.levelsOff ? 'yes' : 'no'} (${r.decidedBy})`,
        ]),
      ),
    },
  ];
  return {
    title: `${OFFERED}× the measured capacity for ${round(seconds.durationSec / 60, 1)} minutes per start mode: stalls, failures, fairness, memory`,
    explain: [
      `Per start mode (card run shape, a fresh stack each): ${WEIGHTS.length} accounts with budgets in the ratio ` +
        `${WEIGHTS.map((w) => w.weight).join(':')}, ${BUDGET_OVER_CAPACITY}× the capacity in all; cards due every ${INTERVAL_SEC} s ` +
        `(first dues spread over the interval) at ${OFFERED}× the capacity in all, split by budget, so each account asks ` +
        `${round((OFFERED / BUDGET_OVER_CAPACITY) * 100)} % of its budget and the engine is the limit. Capacity: single-type ` +
        `checks/s of this invocation's throughput runs of the same start mode (or a brief measurement): ` +
        `${runs.map((run) => `${run.startMode} ${run.capacity.perSecond}/s (${run.capacity.source})`).join('; ')}.`,
      `Request-checks at ${context.options.requestRate}/s throughout the window on cards otherwise polled daily, alternating ` +
        `accounts; request → first gateway call from just before the request (served as the API serves it: the service, then the scheduler woken) to the call's arrival at the simulator ` +
        `(its per-card last-call time, read every ${WATCH_EVERY_MS / 1000} s).`,
      'Round gaps: the completion times recorded in the `claimRound` local-activity markers of every run of each ' +
        'scheduler (continue-as-new included), gaps overlapping the window (the last round to the window end included). ' +
        `Workflow task failures and timeouts: WorkflowTaskFailed / WorkflowTaskTimedOut events in the window in the ` +
        `schedulers' and pollingControl's histories and in ${CARD_RUN_SAMPLE} card runs of the window (a sample).`,
      "Expired leases: the lease-expiry counter of this process's workers and the schedulers' status, whole run. " +
        'Rejected: calls the simulator refused over a budget, whole run. Shares: normal-lane executions started in the window.',
      `RSS (VmRSS) every ${RSS_EVERY_MS / 1000} s in the window of this process (the four workers and the bench), the ` +
        `simulator's process and the Temporal server; ${RSS_RULE}. Live memory: this process's heap right after its latest major ` +
        `collection plus its worker threads' (the SDK's workflow threads) old generations in use, from a diagnostic report; the ` +
        `simulator's from GET /sim/stats; the Temporal server's Go heap objects (memory_heap on its /metrics, TEMPORAL_DEV_METRICS_PORT). ` +
        `Heaps held: V8's physical heap size of every thread; Go's spans in use and idle not released, and its stacks.`,
    ],
    config: {
      ...seconds,
      startModes: context.options.startModes.join(','),
      runShape: 'card',
      intervalSec: INTERVAL_SEC,
      offered: OFFERED,
      budgetOverCapacity: BUDGET_OVER_CAPACITY,
      weights: WEIGHTS.map((w) => `${w.name}:${w.weight}`).join(' '),
      requestRate: context.options.requestRate,
      latencyMs: LATENCY,
    },
    results: { runs },
    tables,
    verdicts: runs.flatMap(verdicts),
    notes: runs.flatMap((run) => [
      `${run.startMode}: ${capacityNote(run.capacity, run.executionsPerSecond, run.offeredPerSecond)}`,
      `${run.startMode}: workflow task failures by cause — schedulers ${JSON.stringify(run.schedulerCounts.workflowTaskFailureCauses)}, ` +
        `pollingControl ${JSON.stringify(run.controlCounts.workflowTaskFailureCauses)}, card runs ${JSON.stringify(run.cardRunCounts.workflowTaskFailureCauses)}; ` +
        `request statuses ${JSON.stringify(run.requests.statuses)}.`,
      ...run.rejections.map((line) => `${run.startMode}: calls rejected — ${line}`),
      `${run.startMode}: ${cpuNote(run.cpuShares)}`,
      `${run.startMode}: request-check stages (p50 / p99 ms, n): request → card run started ${stageText(run.requests.stages.toRunStartMs)} ` +
        `(request → answered ${stageText(run.requests.stages.toAnswerMs)}, answered → run started ${stageText(run.requests.stages.answerToRunStartMs)}: ` +
        `answered → claimed ${stageText(run.requests.stages.answerToClaimMs)}, claimed → run started ${stageText(run.requests.stages.claimToRunStartMs)}); ` +
        `run started → execution started ${stageText(run.requests.stages.runStartToExecutionMs)}; execution started → first gateway call ` +
        `${stageText(run.requests.stages.executionToCallMs)}.`,
    ]),
  };
};
