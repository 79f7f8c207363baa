/**
 * accounts: what an account costs when there are many (docs/capacity.md, 'Many accounts'). A fleet
 * of N small accounts (20 cards each, card_status every 600 s: N/30 checks/s in all), beside 10
 * idle accounts (cards due in an hour or more) and one big account, runs for a window; measured
 * per variant, the variants alternating: the scheduler's workflow tasks and Temporal Cloud actions
 * per idle and per small account-second (from their histories in the window), pollingControl's,
 * lateness p99 of the small and the big accounts, the big account's checks/s against what it is
 * offered, and the CPU of the Temporal server and of the workers. Variants: SCHEDULER_IDLE_MAX_MS
 * 0 (every account claims every tick, busy or idle: the behaviour before 0.2) and the default.
 */
import type { Client } from '@temporalio/client';
import { createCarrier } from '../../src/db/carriers.js';
import { createPollingConfig } from '../../src/db/pollingConfigs.js';
import type { Carrier } from '../../src/domain/carrier.js';
import { pollingControlWorkflowId, schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { DEFAULT_RECONCILE_EVERY_MS } from '../../src/workflows/control/controlState.js';
import { windowSeconds, type Scenario, type ScenarioContext } from '../lib/context.js';
import { createBenchStack, type BenchStack } from '../lib/stack.js';
import { addCards, spreadDues } from '../lib/seed.js';
import { countEvents, emptyCounts, eventMs, eventsInWindow, fetchEvents, millis, type EventCounts } from '../lib/actions.js';
import { latenessBetween } from '../lib/measure.js';
import { cpuNote, measureWindow, type WindowResult } from '../lib/window.js';
import type { RunShape, StartMode } from '../lib/options.js';
import type { Table } from '../lib/report.js';
import { distribution, round, sleep, type Distribution } from '../lib/stats.js';
import type { ScopedCard } from '../../src/domain/card.js';
import { sendRequests, watchFirstCalls, type Pending } from './priority.js';
import { runningSchedulers } from '../../src/app/temporalControl.js';
import { atMost, atLeast, type Verdict } from '../lib/verdict.js';
import { CLAIM_LOOP_HEARTBEAT_TIMEOUT_MS, type SchedulerLoop } from '../../src/workflow-safe/claimLoop.js';

const SMALL_CARDS = 20;
const SMALL_INTERVAL_SEC = 600;
const SMALL_QPS = 5;
const IDLE_ACCOUNTS = 10;
/** The big account: 1 000 cards every 100 s (10 checks/s) on a 20-QPS budget. */
const BIG_CARDS = 1000;
const BIG_INTERVAL_SEC = 100;
const BIG_QPS = 20;
/** Histories read per variant for the small accounts' cost (every idle account's is read). */
const SMALL_SAMPLE = 20;
const DEFAULT_IDLE_MAX_MS = 60_000;
const LATENCY = { p50: 20, p99: 80 } as const;
/** The window opens once every scheduler runs, or after this long (a fresh fleet of 1 000 starts in a burst). */
const SCHEDULERS_START_LIMIT_MS = 600_000;

/** The targets of the issue on accounts, for the variant docs/capacity.md recommends. */
const IDLE_TASKS_PER_SEC = 0.02;
const IDLE_ACTIONS_PER_SEC = 0.05;
const LATENESS_P99_MS = 2000;
const BIG_SHARE = 0.9;
const CLAIMING_WITHIN_SEC = 60;
const REQUEST_TO_CALL_P99_MS = 2000;
/** After the window: request-checks at this rate for this long, spread over this many small accounts, their first gateway call watched. */
const REQUEST_RATE = 2;
const REQUEST_PHASE_SEC = 60;
const REQUEST_ACCOUNTS = 40;
/** How often the simulator's per-card call stamps are read in the request phase (the stamp is the simulator's: this only bounds how soon a later call could hide it). */
const WATCH_EVERY_MS = 500;
const DRAIN_MS = 15_000;
/** Schedulers whose start is taken apart (startStages). */
const START_SAMPLE = 40;

export interface AccountsVariant {
  readonly accounts: number;
  readonly schedulerLoop: SchedulerLoop;
  readonly startMode: StartMode;
  readonly runShape: RunShape;
  readonly idleMaxMs: number;
}

interface Cost {
  readonly workflowTasksPerSec: number;
  readonly actionsPerSec: number;
  readonly eventsPerSec: number;
}

export interface AccountsRun extends AccountsVariant {
  readonly windowSeconds: number;
  /** From pollingControl's start until every account's scheduler ran (visibility); null: not within the limit. */
  readonly schedulersRunningAfterSec: number | null;
  /** Until every account claimed (loop activity: its loop's status view in Redis; workflow loop: as running); null: not within the limit. */
  readonly accountsClaimingAfterSec: number | null;
  /** Loop activity: where a sample of schedulers' starts went. */
  readonly startStages?: StartStages;
  readonly idle: Cost;
  readonly small: Cost;
  /** pollingControl's actions per second, and per account-second. */
  readonly control: { readonly actionsPerSec: number; readonly actionsPerAccountSec: number };
  readonly smallChecksPerSec: number;
  readonly smallOfferedPerSec: number;
  readonly smallLatenessP99Ms: number | null;
  readonly smallExecutions: number;
  readonly bigChecksPerSec: number;
  readonly bigOfferedPerSec: number;
  readonly bigLatenessP99Ms: number | null;
  /** Scheduler actions of every account (sampled small ones scaled to all, idle, big; claim loop heartbeats estimated) ÷ checks in the window. */
  readonly schedulerActionsPerCheck: number;
  /** Every action in the window ÷ checks: the schedulers', pollingControl's and the card runs' (sampled, scaled to every run). */
  readonly actionsPerCheck: number;
  /** Card runs that started a check in the window, and the checks each carried on average. */
  readonly cardRuns: number;
  readonly checksPerRun: number;
  /** The request phase after the window: request-checks sent, those whose first gateway call was seen, request → that call. */
  readonly requestsSent: number;
  readonly requestsCalled: number;
  readonly requestToCallMs: Distribution;
  readonly cpu: WindowResult['cpu'];
  readonly cpuNote: string;
}

/**
 * After the window (the simulator's per-card stamps are read every {@link WATCH_EVERY_MS}, which
 * the window's CPU figures should not carry): request-checks at {@link REQUEST_RATE}/s across
 * some small accounts while the whole fleet runs, each timed from the request to its card's first
 * gateway call.
 */
async function requestPhase(
  stack: BenchStack,
  pools: { carrierId: string; cards: ScopedCard[] }[],
  log: (line: string) => void,
): Promise<{ sent: number; called: number; toCallMs: Distribution }> {
  const sent: Pending[] = [];
  const answers: Promise<void>[] = [];
  const watcher = watchFirstCalls(stack, sent, WATCH_EVERY_MS);
  log(`request phase: ${REQUEST_RATE} request-checks/s for ${REQUEST_PHASE_SEC} s over ${pools.length} small accounts`);
  await sendRequests(stack, pools, REQUEST_RATE, Date.now() + REQUEST_PHASE_SEC * 1000, sent, answers);
  await Promise.all(answers);
  const drainUntil = Date.now() + DRAIN_MS;
  while (Date.now() < drainUntil && sent.some((p) => p.status === 'requested' && p.firstCallAt === undefined)) await sleep(200);
  await watcher.stop();
  const called = sent.filter((p) => p.firstCallAt !== undefined);
  const failed = sent.filter((p) => p.status !== 'requested');
  if (failed.length > 0) log(`request phase: ${failed.length} not requested (${failed[0]?.status ?? ''})`);
  return { sent: sent.length, called: called.length, toCallMs: distribution(called.map((p) => p.firstCallAt! - p.requestedAt)) };
}

const perSec = (counts: EventCounts, accounts: number, seconds: number): Cost => ({
  workflowTasksPerSec: round(counts.workflowTasks / accounts / seconds, 4),
  actionsPerSec: round(counts.actions / accounts / seconds, 4),
  eventsPerSec: round(counts.events / accounts / seconds, 3),
});

async function windowCounts(client: Client, workflowIds: readonly string[], from: Date, to: Date): Promise<EventCounts> {
  const total = emptyCounts();
  // A few at a time: each is a history fetch from the server the fleet runs on.
  for (let i = 0; i < workflowIds.length; i += 5) {
    // A scheduler that never started (counted in schedulersRunningAfterSec) has no history: nothing to count.
    const batch = await Promise.all(
      workflowIds.slice(i, i + 5).map((id) =>
        eventsInWindow(client, id, from, to).catch((error: unknown) => {
          if (String(error).includes('NOT_FOUND')) return [];
          throw error;
        }),
      ),
    );
    for (const events of batch) countEvents(events, total);
  }
  return total;
}

/** The accounts whose claim loop activity has ticked and still does (its status view is fresh in Redis). */
async function claimingLoops(stack: BenchStack, carrierIds: readonly string[]): Promise<number> {
  const views = await Promise.all(carrierIds.map((id) => stack.deps.store.loopView(id)));
  return views.filter((view) => view !== null).length;
}

interface FleetStart {
  /** From pollingControl's start until every account's scheduler ran (visibility); null: not within the limit. */
  readonly runningAfterSec: number | null;
  /** Until every account claimed (loop activity: its loop ticked; workflow loop: its scheduler ran); null: not within the limit. */
  readonly claimingAfterSec: number | null;
}

/** Where a scheduler's start goes (ms, from its run's start): its first workflow task started, completed (the hand-over), its loop's lap started. */
interface StartStages {
  readonly samples: number;
  readonly toFirstTaskMs: Distribution;
  readonly firstTaskMs: Distribution;
  readonly toLapStartMs: Distribution;
}

/** A sample of the small accounts' schedulers, read once every account claims: their history's first events and their lap's start (a running activity's start is in no history yet). */
async function startStages(stack: BenchStack, carrierIds: readonly string[]): Promise<StartStages> {
  const toFirstTask: number[] = [];
  const firstTask: number[] = [];
  const toLap: number[] = [];
  for (const carrierId of carrierIds) {
    const handle = stack.client.workflow.getHandle(schedulerWorkflowId(carrierId, stack.ref.workflowIdPrefix));
    const [events, described] = await Promise.all([fetchEvents(handle), handle.describe()]);
    const started = events[0] === undefined ? undefined : eventMs(events[0]);
    if (started === undefined) continue;
    const taskStarted = events.find((event) => event.workflowTaskStartedEventAttributes);
    const taskCompleted = events.find((event) => event.workflowTaskCompletedEventAttributes);
    if (taskStarted) toFirstTask.push(eventMs(taskStarted) - started);
    if (taskStarted && taskCompleted) firstTask.push(eventMs(taskCompleted) - eventMs(taskStarted));
    const lapAt = millis(described.raw.pendingActivities?.[0]?.lastStartedTime);
    if (lapAt > 0) toLap.push(lapAt - started);
  }
  return { samples: carrierIds.length, toFirstTaskMs: distribution(toFirstTask), firstTaskMs: distribution(firstTask), toLapStartMs: distribution(toLap) };
}

/** Waits until every account's scheduler runs (Temporal visibility) and claims; the seconds each took (null: not within the limit). */
async function fleetStart(stack: BenchStack, carrierIds: readonly string[], loop: SchedulerLoop, log: (line: string) => void): Promise<FleetStart> {
  const began = Date.now();
  let runningAfterSec: number | null = null;
  let claimingAfterSec: number | null = null;
  for (let lastLog = began; ;) {
    const seconds = round((Date.now() - began) / 1000, 1);
    const running = runningAfterSec === null ? (await runningSchedulers(stack.ref)).size : carrierIds.length;
    if (runningAfterSec === null && running >= carrierIds.length) runningAfterSec = seconds;
    const claiming = loop === 'activity' ? await claimingLoops(stack, carrierIds) : running;
    if (claimingAfterSec === null && claiming >= carrierIds.length) claimingAfterSec = round((Date.now() - began) / 1000, 1);
    if (runningAfterSec !== null && claimingAfterSec !== null) return { runningAfterSec, claimingAfterSec };
    if (Date.now() - began > SCHEDULERS_START_LIMIT_MS) {
      log(`after ${SCHEDULERS_START_LIMIT_MS / 1000} s: ${running} of ${carrierIds.length} schedulers running, ${claiming} claiming`);
      return { runningAfterSec, claimingAfterSec };
    }
    if (Date.now() - lastLog >= 10_000) {
      log(`${seconds} s: ${running} of ${carrierIds.length} schedulers running, ${claiming} claiming`);
      lastLog = Date.now();
    }
    await sleep(1000);
  }
}

async function seedFleet(
  stack: BenchStack,
  accounts: number,
  log: (line: string) => void,
): Promise<{ small: Carrier[]; idle: Carrier[]; big: Carrier; requestPools: { carrierId: string; cards: ScopedCard[] }[] }> {
  const typeGroups = { card_status: 'status' } as const;
  const carrier = async (name: string, qps: number): Promise<Carrier> => {
    const created = await createCarrier(stack.pool, {
      name,
      gatewayAccount: `${name}-gw`,
      groups: [{ name: 'status', qps }],
      typeGroups,
      inflightLimit: 200,
      leaseMs: 20_000,
      stepTimeoutMs: 3000,
      totalTimeoutMs: 10_000,
      backoffBaseMs: 1000,
    });
    await stack.simulator.updateAccount(`${name}-gw`, { groups: { status: qps }, typeGroups, latencyMs: { ...LATENCY }, errorRate: 0 });
    return created;
  };
  // One rule for the fleet, one for the big account and one for the idle ones (not one per account).
  await createPollingConfig(stack.pool, { name: 'fleet', priority: 1, match: {}, intervalsSec: { card_status: SMALL_INTERVAL_SEC } });
  let serial = 0;
  /** `count` cards for the account, their card_status dues spread over `intervalMs` from `leadMs` on. */
  const cardsSpread = async (account: Carrier, count: number, intervalMs: number, leadMs: number): Promise<void> => {
    serial += 1;
    const cards = await addCards(stack, account.id, serial, 0, count, 'active');
    await spreadDues(stack, { carrier: account, cards }, 'card_status', intervalMs, leadMs);
  };
  const small: Carrier[] = [];
  for (let i = 0; i < accounts; i += 1) {
    const account = await carrier(`small${i}`, SMALL_QPS);
    await cardsSpread(account, SMALL_CARDS, SMALL_INTERVAL_SEC * 1000, (i * 1000 * SMALL_INTERVAL_SEC) / accounts / SMALL_CARDS);
    small.push(account);
    if ((i + 1) % 100 === 0) log(`seeded ${i + 1} of ${accounts} small accounts`);
  }
  const idle: Carrier[] = [];
  for (let i = 0; i < IDLE_ACCOUNTS; i += 1) {
    const account = await carrier(`idle${i}`, SMALL_QPS);
    await createPollingConfig(stack.pool, { name: `idle${i}`, priority: 10, match: { carrierId: account.id }, intervalsSec: { card_status: 86_400 } });
    // Nothing due for an hour: the account is enabled, polled, and has nothing to do in the window.
    await cardsSpread(account, SMALL_CARDS, 86_400_000, 3_600_000);
    idle.push(account);
  }
  // Request-check targets, polled daily otherwise (their own schedule rarely meets the phase): a few cards on some small accounts.
  await createPollingConfig(stack.pool, { name: 'requested', priority: 20, match: { cardStatus: 'test' }, intervalsSec: { card_status: 86_400 } });
  const requestPools: { carrierId: string; cards: ScopedCard[] }[] = [];
  const step = Math.max(1, Math.floor(small.length / REQUEST_ACCOUNTS));
  for (let i = 0; i < small.length; i += step) {
    serial += 1;
    const cards = await addCards(stack, small[i]!.id, serial, 0, Math.ceil((REQUEST_RATE * REQUEST_PHASE_SEC) / REQUEST_ACCOUNTS) + 1, 'test');
    requestPools.push({ carrierId: small[i]!.id, cards });
  }
  const big = await carrier('big', BIG_QPS);
  await createPollingConfig(stack.pool, { name: 'big', priority: 10, match: { carrierId: big.id }, intervalsSec: { card_status: BIG_INTERVAL_SEC } });
  await cardsSpread(big, BIG_CARDS, BIG_INTERVAL_SEC * 1000, 1000);
  return { small, idle, big, requestPools };
}

/** Runs whose histories are read for the card runs' actions (scaled to every run of the window). */
const RUN_SAMPLE = 30;

/**
 * The card runs that started checks in the window (execution rows name their run) and their
 * actions: a sample of their whole histories, scaled to all of them.
 */
async function cardRunActions(stack: BenchStack, window: WindowResult): Promise<{ runs: number; actions: number }> {
  // By run, not workflow id: a card's `cardCheck` runs all have the id `card-<id>`.
  const { rows } = await stack.pool.query<{ workflow_id: string; run_id: string }>(
    'SELECT DISTINCT workflow_id, run_id FROM card_execution WHERE started_at >= $1 AND started_at < $2',
    [window.from, window.to],
  );
  const step = Math.max(1, Math.floor(rows.length / RUN_SAMPLE));
  const sample = rows.filter((_, i) => i % step === 0).slice(0, RUN_SAMPLE);
  const counts = emptyCounts();
  for (const run of sample) {
    const history = await stack.client.workflow
      .getHandle(run.workflow_id, run.run_id)
      .fetchHistory()
      .catch(() => undefined);
    countEvents(history?.events ?? [], counts);
  }
  return { runs: rows.length, actions: sample.length === 0 ? 0 : (counts.actions / sample.length) * rows.length };
}

/** A claim loop's heartbeats (not in any history): at most one per 0.8 × the heartbeat timeout, the SDK's throttle; an upper bound. */
const heartbeatsPerLoopSec = 1 / ((0.8 * CLAIM_LOOP_HEARTBEAT_TIMEOUT_MS) / 1000);

async function checksOf(stack: BenchStack, window: WindowResult, where: string): Promise<number> {
  const { rows } = await stack.pool.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM card_execution WHERE started_at >= $1 AND started_at < $2 AND ${where}`,
    [window.from, window.to],
  );
  return Number(rows[0]?.n ?? 0);
}

export async function runAccounts(
  context: ScenarioContext,
  variant: AccountsVariant,
  seconds: { warmupSec: number; durationSec: number },
): Promise<AccountsRun> {
  const { log } = context;
  const tag = `${variant.accounts} accounts, ${variant.schedulerLoop} loop, ${variant.startMode} starts, ${variant.runShape} runs, idle sleep ${variant.idleMaxMs === 0 ? 'off' : `${variant.idleMaxMs / 1000} s`}`;
  log(`accounts: ${tag}`);
  const stack = await createBenchStack({ ...context.config, SCHEDULER_IDLE_MAX_MS: variant.idleMaxMs }, `acc${variant.accounts}`, {
    cardRunShape: variant.runShape,
    cardStartMode: variant.startMode,
    schedulerLoop: variant.schedulerLoop,
    reconcileEveryMs: DEFAULT_RECONCILE_EVERY_MS,
  });
  try {
    const fleet = await seedFleet(stack, variant.accounts, log);
    await stack.startOrchestration();
    const carrierIds = [...fleet.small, ...fleet.idle, fleet.big].map((carrier) => carrier.id);
    const total = carrierIds.length;
    const started = await fleetStart(stack, carrierIds, variant.schedulerLoop, log);
    log(`all ${total} schedulers running after ${started.runningAfterSec ?? '-'} s, claiming after ${started.claimingAfterSec ?? '-'} s`);
    const stages =
      variant.schedulerLoop === 'activity'
        ? await startStages(
            stack,
            fleet.small.filter((_, i) => i % Math.max(1, Math.floor(fleet.small.length / START_SAMPLE)) === 0).map((carrier) => carrier.id),
          )
        : undefined;
    if (stages)
      log(
        `scheduler start stages (p50 / max ms from the run's start, ${stages.samples} schedulers): first workflow task ${stages.toFirstTaskMs.p50} / ${stages.toFirstTaskMs.max}, ` +
          `its duration ${stages.firstTaskMs.p50} / ${stages.firstTaskMs.max}, lap started ${stages.toLapStartMs.p50} / ${stages.toLapStartMs.max}`,
      );
    const window = await measureWindow(stack, seconds, log);
    const id = (carrier: Carrier): string => schedulerWorkflowId(carrier.id, stack.ref.workflowIdPrefix);
    const sample = fleet.small.filter((_, i) => i % Math.max(1, Math.floor(fleet.small.length / SMALL_SAMPLE)) === 0).slice(0, SMALL_SAMPLE);
    const [idleCounts, smallCounts, bigCounts, controlCounts] = await Promise.all([
      windowCounts(stack.client, fleet.idle.map(id), window.from, window.to),
      windowCounts(stack.client, sample.map(id), window.from, window.to),
      windowCounts(stack.client, [id(fleet.big)], window.from, window.to),
      windowCounts(stack.client, [pollingControlWorkflowId(stack.ref.workflowIdPrefix)], window.from, window.to),
    ]);
    const smallIds = fleet.small.map((c) => Number(c.id));
    const smallWhere = `carrier_id = ANY(ARRAY[${smallIds.join(',')}]::bigint[])`;
    const bigWhere = `carrier_id = ${Number(fleet.big.id)}`;
    const [smallChecks, bigChecks, allChecks, smallLateness, bigLateness] = await Promise.all([
      checksOf(stack, window, smallWhere),
      checksOf(stack, window, bigWhere),
      checksOf(stack, window, 'true'),
      latenessBetween(stack.pool, window.from, window.to, smallWhere),
      latenessBetween(stack.pool, window.from, window.to, bigWhere),
    ]);
    const s = window.seconds;
    const loops = variant.schedulerLoop === 'activity' ? total : 0;
    const schedulerActions =
      (smallCounts.actions / Math.max(1, sample.length)) * fleet.small.length + idleCounts.actions + bigCounts.actions + loops * s * heartbeatsPerLoopSec;
    const runActions = await cardRunActions(stack, window);
    const requests = await requestPhase(stack, fleet.requestPools, log);
    const perAccount = (counts: EventCounts, accounts: number): Cost => {
      const cost = perSec(counts, accounts, s);
      // A claim loop's heartbeats are actions too (estimated: they are in no history).
      return variant.schedulerLoop === 'activity' ? { ...cost, actionsPerSec: round(cost.actionsPerSec + heartbeatsPerLoopSec, 4) } : cost;
    };
    const run: AccountsRun = {
      ...variant,
      windowSeconds: round(s, 1),
      schedulersRunningAfterSec: started.runningAfterSec,
      ...(stages === undefined ? {} : { startStages: stages }),
      accountsClaimingAfterSec: started.claimingAfterSec,
      idle: perAccount(idleCounts, fleet.idle.length),
      small: perAccount(smallCounts, Math.max(1, sample.length)),
      control: {
        actionsPerSec: round(controlCounts.actions / s, 3),
        actionsPerAccountSec: round(controlCounts.actions / s / (variant.accounts + IDLE_ACCOUNTS + 1), 5),
      },
      smallChecksPerSec: round(smallChecks / s, 2),
      smallOfferedPerSec: round((variant.accounts * SMALL_CARDS) / SMALL_INTERVAL_SEC, 2),
      smallLatenessP99Ms: smallLateness.executions > 0 ? smallLateness.latenessMs.p99 : null,
      smallExecutions: smallLateness.executions,
      bigChecksPerSec: round(bigChecks / s, 2),
      bigOfferedPerSec: round(BIG_CARDS / BIG_INTERVAL_SEC, 2),
      bigLatenessP99Ms: bigLateness.executions > 0 ? bigLateness.latenessMs.p99 : null,
      schedulerActionsPerCheck: allChecks > 0 ? round(schedulerActions / allChecks, 3) : 0,
      actionsPerCheck: allChecks > 0 ? round((schedulerActions + controlCounts.actions + runActions.actions) / allChecks, 3) : 0,
      cardRuns: runActions.runs,
      checksPerRun: runActions.runs > 0 ? round(allChecks / runActions.runs, 2) : 0,
      requestsSent: requests.sent,
      requestsCalled: requests.called,
      requestToCallMs: requests.toCallMs,
      cpu: window.cpu,
      cpuNote: cpuNote(window.cpu),
    };
    log(
      `accounts: ${tag}: ${run.actionsPerCheck} actions/check (${run.checksPerRun} checks/run); idle ${run.idle.workflowTasksPerSec} tasks/s ${run.idle.actionsPerSec} actions/s per account; small ${run.small.workflowTasksPerSec} / ${run.small.actionsPerSec}; ` +
        `small lateness p99 ${run.smallLatenessP99Ms} ms; big ${run.bigChecksPerSec} of ${run.bigOfferedPerSec} checks/s; Temporal ${Math.round(run.cpu.temporal * 100)} %, workers ${Math.round(run.cpu.bench * 100)} %`,
    );
    return run;
  } finally {
    await stack.close();
  }
}

/**
 * `--accounts` list: each fleet size in each start mode and run shape with the idle sleep on, and
 * off beside it up to {@link MAX_ACCOUNTS_TICKING} accounts (above, a tick a second per account is
 * more than the machine runs: the figure would be the machine's saturation, not the shape's cost).
 */
const MAX_ACCOUNTS_TICKING = 100;

export const accounts: Scenario = async (context) => {
  const seconds = windowSeconds(context, { warmupSec: 60, durationSec: 120 });
  const runs: AccountsRun[] = [];
  for (const n of context.options.accountCounts) {
    for (const schedulerLoop of context.options.schedulerLoops) {
      // A claim loop activity starts its runs itself: one start mode (the client's).
      const startModes: readonly StartMode[] = schedulerLoop === 'activity' ? ['client'] : context.options.startModes;
      for (const startMode of startModes) {
        for (const runShape of context.options.runShapes) {
          const sleeps = schedulerLoop === 'workflow' && n <= MAX_ACCOUNTS_TICKING ? [0, DEFAULT_IDLE_MAX_MS] : [DEFAULT_IDLE_MAX_MS];
          for (const idleMaxMs of sleeps) runs.push(await runAccounts(context, { accounts: n, schedulerLoop, startMode, runShape, idleMaxMs }, seconds));
        }
      }
    }
  }
  const label = (run: AccountsRun): string =>
    run.schedulerLoop === 'activity'
      ? `${run.accounts} × ${SMALL_CARDS}, loop activity, ${run.runShape}`
      : `${run.accounts} × ${SMALL_CARDS}, ${run.startMode}, ${run.runShape}, sleep ${run.idleMaxMs === 0 ? 'off' : 'on'}`;
  const pct = (v: number): string => `${Math.round(v * 100)} %`;
  const ms = (v: number | null): string => (v === null ? '–' : String(Math.round(v)));
  const table: Table = {
    headers: [
      'variant',
      'all schedulers running after s',
      'all accounts claiming after s',
      'idle acct: tasks/s',
      'idle acct: actions/s',
      'small acct: tasks/s',
      'small acct: actions/s',
      'pollingControl actions/acct·s',
      'small checks/s (offered)',
      'small lateness p99 ms',
      'big checks/s (offered)',
      'big lateness p99 ms',
      'scheduler actions/check',
      'all actions/check',
      'checks/run',
      'request → call p50 / p99 ms (seen of sent)',
      'Temporal CPU',
      'workers CPU',
    ],
    numeric: [false, true, true, true, true, true, true, true, false, true, false, true, true, true, true, false, true, true],
    rows: runs.map((run) => [
      label(run),
      run.schedulersRunningAfterSec ?? '–',
      run.accountsClaimingAfterSec ?? '–',
      run.idle.workflowTasksPerSec,
      run.idle.actionsPerSec,
      run.small.workflowTasksPerSec,
      run.small.actionsPerSec,
      run.control.actionsPerAccountSec,
      `${run.smallChecksPerSec} (${run.smallOfferedPerSec})`,
      ms(run.smallLatenessP99Ms),
      `${run.bigChecksPerSec} (${run.bigOfferedPerSec})`,
      ms(run.bigLatenessP99Ms),
      run.schedulerActionsPerCheck,
      run.actionsPerCheck,
      run.checksPerRun,
      `${ms(run.requestToCallMs.p50)} / ${ms(run.requestToCallMs.p99)} (${run.requestsCalled} of ${run.requestsSent})`,
      pct(run.cpu.temporal),
      pct(run.cpu.bench),
    ]),
  };
  const verdicts: Verdict[] = runs
    .filter((run) => run.idleMaxMs > 0)
    .flatMap((run) => [
      atMost(`idle account workflow tasks/s (${label(run)})`, run.idle.workflowTasksPerSec, IDLE_TASKS_PER_SEC, String, `${IDLE_ACCOUNTS} idle accounts`),
      atMost(`idle account actions/s (${label(run)})`, run.idle.actionsPerSec, IDLE_ACTIONS_PER_SEC, String, `${IDLE_ACCOUNTS} idle accounts`),
      ...(run.smallLatenessP99Ms === null
        ? []
        : [atMost(`small accounts' lateness p99 ms (${label(run)})`, run.smallLatenessP99Ms, LATENESS_P99_MS, String, `${run.smallExecutions} executions`)]),
      ...(run.accountsClaimingAfterSec === null
        ? [atMost(`every account claiming within s (${label(run)})`, Number.POSITIVE_INFINITY, CLAIMING_WITHIN_SEC, String, 'not all within the limit')]
        : [
            atMost(
              `every account claiming within s (${label(run)})`,
              run.accountsClaimingAfterSec,
              CLAIMING_WITHIN_SEC,
              String,
              `${run.accounts + IDLE_ACCOUNTS + 1} accounts`,
            ),
          ]),
      ...(run.requestToCallMs.p99 === null
        ? []
        : [
            atMost(
              `request-check → first gateway call p99 ms (${label(run)})`,
              run.requestToCallMs.p99,
              REQUEST_TO_CALL_P99_MS,
              String,
              `${run.requestsCalled} of ${run.requestsSent} requests`,
            ),
          ]),
      atLeast(
        `big account checks/s ÷ offered (${label(run)})`,
        round(run.bigChecksPerSec / run.bigOfferedPerSec, 3),
        BIG_SHARE,
        String,
        `${run.bigOfferedPerSec} offered`,
      ),
    ]);
  return {
    title: `accounts: N small accounts (${SMALL_CARDS} cards, card_status every ${SMALL_INTERVAL_SEC} s) beside ${IDLE_ACCOUNTS} idle and one big account, idle sleep off and on`,
    explain: [
      `Each variant: a fresh stack; N small accounts of ${SMALL_CARDS} cards (card_status every ${SMALL_INTERVAL_SEC} s, ${SMALL_QPS} QPS each, first dues spread over the interval and across accounts), ${IDLE_ACCOUNTS} idle accounts (${SMALL_CARDS} cards, nothing due for an hour), one big account (${BIG_CARDS} cards every ${BIG_INTERVAL_SEC} s on ${BIG_QPS} QPS); pollingControl reconciles every ${DEFAULT_RECONCILE_EVERY_MS / 1000} s (the default).`,
      'The warm-up starts once every scheduler runs (Temporal visibility; "all schedulers running after": from pollingControl\'s start, the fleet created just before).',
      `"sleep off" = SCHEDULER_IDLE_MAX_MS=0: every scheduler claims every tick whatever is due (the behaviour before 0.2), run up to ${MAX_ACCOUNTS_TICKING} accounts; "sleep on" = ${DEFAULT_IDLE_MAX_MS / 1000} s (the default). child / client = CARD_START_MODE, card / batch = CARD_RUN_SHAPE.`,
      "tasks/s and actions/s per account: every event of the account's scheduler runs in the window (Temporal Cloud actions by bench/lib/actions.ts) ÷ accounts ÷ window seconds; small accounts from a sample of up to 20 histories.",
      'Lateness = execution start − earliest due (card_execution.details.latenessMs) of executions started in the window. CPU = share of one core in the window; workers CPU is this process (4 workers + the bench).',
      "scheduler actions/check: every scheduler action in the window (small ones scaled from the sample) ÷ every check started in the window. all actions/check adds pollingControl's and the card runs' (a sample of up to 30 runs' whole histories, scaled to every run that started a check in the window).",
      `"all accounts claiming after": from pollingControl's start until every account's claim loop ticked (its status view in Redis; workflow loop: its scheduler ran). Request → call: after the window, ${REQUEST_RATE} request-checks/s for ${REQUEST_PHASE_SEC} s on cards of ${REQUEST_ACCOUNTS} small accounts (polled daily otherwise), from the request to the card's first gateway call (the simulator's stamp, read every ${WATCH_EVERY_MS} ms).`,
      `"loop activity" = SCHEDULER_LOOP=activity (claim loops as heartbeating activities; runs started by the loop with the client; in the batch shape, batches shared across accounts). Its heartbeats are in no history: counted as one action per ${(0.8 * CLAIM_LOOP_HEARTBEAT_TIMEOUT_MS) / 1000} s per account (the SDK's throttle; an upper bound).`,
    ],
    config: {
      smallCards: SMALL_CARDS,
      smallIntervalSec: SMALL_INTERVAL_SEC,
      idleAccounts: IDLE_ACCOUNTS,
      bigCards: BIG_CARDS,
      bigIntervalSec: BIG_INTERVAL_SEC,
      ...seconds,
    },
    results: { runs },
    tables: [table],
    verdicts,
    notes: runs.flatMap((run) => [
      `${label(run)}: ${run.cpuNote}`,
      ...(run.startStages === undefined
        ? []
        : [
            `${label(run)}: scheduler start stages (p50 / max ms from each run's start, ${run.startStages.samples} small accounts' schedulers): ` +
              `first workflow task started ${run.startStages.toFirstTaskMs.p50} / ${run.startStages.toFirstTaskMs.max}, that task took ${run.startStages.firstTaskMs.p50} / ${run.startStages.firstTaskMs.max}, ` +
              `the loop's lap started ${run.startStages.toLapStartMs.p50} / ${run.startStages.toLapStartMs.max}`,
          ]),
    ]),
  };
};
