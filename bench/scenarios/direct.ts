/**
 * direct: the throughput workload through a minimal loop with no Temporal — per account, claim
 * rounds (claim.lua), and per claimed card acquireExec.lua → limiter + gateway client
 * (callThroughLimiter, the same code the gateway activity runs) → finish.lua with the next due.
 * It writes nothing to PostgreSQL: it is the reference for what the orchestration adds on top of
 * the Redis authority and the gateway call. The summary gives the orchestration's throughput as a
 * ratio of it.
 */
import { callThroughLimiter } from '../../src/gateway/limitedCall.js';
import { DueField } from '../../src/redis/dueFields.js';
import { windowSeconds, type Scenario, type ScenarioContext } from '../lib/context.js';
import { createBenchStack, type BenchStack } from '../lib/stack.js';
import { seedAccount, type SeededAccount } from '../lib/seed.js';
import { cpuNote, measureWindow } from '../lib/window.js';
import type { CpuTimes } from '../lib/processes.js';
import { round, sleep } from '../lib/stats.js';
import { THROUGHPUT_CONFIG, THROUGHPUT_INFLIGHT, THROUGHPUT_INTERVAL_SEC, THROUGHPUT_QPS, throughputSpecs } from './throughputLoad.js';

const LEASE_MS = 20_000;
const STEP_TIMEOUT_MS = 3000;
/** Pause of a claimer whose round found nothing (all its cards in flight or not yet due). */
const IDLE_MS = 5;

interface Counters {
  executions: number;
  deferred: number;
  failed: number;
}

async function executeCard(stack: BenchStack, account: SeededAccount, cardId: string, iccid: string, token: string, counters: Counters): Promise<void> {
  const { store, gateway, limiter } = stack.deps;
  const carrierId = account.carrier.id;
  const exec = await store.acquireExec(carrierId, cardId, token, 'direct', LEASE_MS);
  if (exec !== 'acquired') return;
  const started = Date.now();
  let outcome: 'ok' | 'deferred' | 'failed' = 'ok';
  try {
    const result = await callThroughLimiter(
      { client: gateway, limiter },
      { carrierId, group: 'status', type: 'card_status', account: account.gatewayAccount, iccid, deadline: started + STEP_TIMEOUT_MS },
    );
    if (result.outcome === 'deferred') outcome = 'deferred';
  } catch {
    outcome = 'failed';
  }
  const now = Date.now();
  // Same due bookkeeping as a successful check: next due one interval on, last success now.
  await store.finish({
    carrierId,
    cardId,
    token,
    now,
    set:
      outcome === 'ok'
        ? { [DueField.due('card_status')]: now + THROUGHPUT_INTERVAL_SEC * 1000, [DueField.ok('card_status')]: now }
        : { [DueField.due('card_status')]: now + 1000 },
    del: outcome === 'ok' ? [DueField.fail('card_status')] : [],
  });
  if (outcome === 'ok') counters.executions += 1;
  else if (outcome === 'deferred') counters.deferred += 1;
  else counters.failed += 1;
}

/** One account's claimer until `stopped()`; every claimed card runs concurrently (≤ inflight limit). */
async function runAccount(stack: BenchStack, account: SeededAccount, counters: Counters, stopped: () => boolean): Promise<void> {
  const iccids = new Map(account.cards.map((card) => [card.id, card.iccid]));
  const tasks = new Set<Promise<void>>();
  for (let round = 0; !stopped(); round += 1) {
    const result = await stack.deps.store.claim({
      carrierId: account.carrier.id,
      leaseMs: LEASE_MS,
      inflightLimit: THROUGHPUT_INFLIGHT,
      priorityRatio: 0.5,
      tokenPrefix: `direct-${round}`,
      groupBudget: { status: THROUGHPUT_QPS },
      typeGroups: { card_status: 'status' },
      countRealname: false,
    });
    for (const card of result.claimed) {
      const task = executeCard(stack, account, card.cardId, iccids.get(card.cardId) ?? '', card.token, counters).finally(() => tasks.delete(task));
      tasks.add(task);
    }
    if (result.claimed.length === 0) await sleep(IDLE_MS);
  }
  await Promise.allSettled([...tasks]);
}

/** One measurement of the direct loop; also taken briefly by throughput for its batch ÷ direct ratio. */
export interface DirectLoop {
  readonly date: string;
  readonly windowSeconds: number;
  readonly executions: number;
  readonly executionsPerSecond: number;
  readonly deferred: number;
  readonly failed: number;
  readonly cpuShares: CpuTimes;
}

export async function measureDirectLoop(context: ScenarioContext, seconds: { warmupSec: number; durationSec: number }): Promise<DirectLoop> {
  const stack = await createBenchStack(context.config, 'direct');
  let stop = false;
  try {
    const accounts: SeededAccount[] = [];
    for (const spec of throughputSpecs('dr')) accounts.push(await seedAccount(stack, spec));
    const counters: Counters = { executions: 0, deferred: 0, failed: 0 };
    const loops = Promise.all(accounts.map((account) => runAccount(stack, account, counters, () => stop)));
    let atStart = 0;
    const window = await measureWindow(stack, seconds, context.log, async () => {
      atStart = counters.executions;
    });
    const executions = counters.executions - atStart;
    stop = true;
    await loops;
    return {
      date: window.from.toISOString(),
      windowSeconds: round(window.seconds),
      executions,
      executionsPerSecond: round(executions / window.seconds, 1),
      deferred: counters.deferred,
      failed: counters.failed,
      cpuShares: window.cpu,
    };
  } finally {
    stop = true;
    await stack.close();
  }
}

export const direct: Scenario = async (context) => {
  const seconds = windowSeconds(context, { warmupSec: 10, durationSec: 45 });
  const loop = await measureDirectLoop(context, seconds);
  context.measured.direct = loop;
  const executions = loop.executions;
  const window = { seconds: loop.windowSeconds, cpu: loop.cpuShares };
  const perSecond = executions / window.seconds;
  // This invocation's single-type measurements only: an old figure would compare different loads.
  const rows: (string | number)[][] = [['direct loop (no Temporal, no SQL)', round(perSecond, 1), '1']];
  const compared = context.measured.cardRuns.filter((run) => run.shape === 'single');
  for (const run of compared)
    rows.push([
      `orchestration, ${run.runShape} runs, ${run.startMode} starts (${run.source}, ${run.date.slice(11, 19)})`,
      run.executionsPerSecond,
      round(run.executionsPerSecond / perSecond, 3),
    ]);
  const best = compared.reduce((n, run) => Math.max(n, run.executionsPerSecond), 0);
  const ratio = compared.length > 0 && perSecond > 0 ? best / perSecond : undefined;
  return {
    title: 'direct loop over the same Lua scripts (reference)',
    explain: [
      'The throughput workload, executed by claim → acquireExec → limiter + gateway client → finish in one loop per ' +
        'account, no Temporal and no PostgreSQL writes.',
      "ratio = executions/s ÷ the direct loop's executions/s.",
    ],
    config: { ...seconds, ...THROUGHPUT_CONFIG },
    results: {
      windowSeconds: round(window.seconds),
      executions,
      executionsPerSecond: round(perSecond, 1),
      deferred: loop.deferred,
      failed: loop.failed,
      orchestration: compared.map((run) => ({
        source: run.source,
        startMode: run.startMode,
        runShape: run.runShape,
        executionsPerSecond: run.executionsPerSecond,
      })),
      bestRatio: ratio === undefined ? null : round(ratio, 3),
      cpuShares: window.cpu,
    },
    tables: [{ headers: ['executor', 'executions/s', 'ratio'], numeric: [false, true, true], rows }],
    verdicts: [],
    notes: [
      ratio !== undefined
        ? `The orchestration reaches at best ${round(ratio * 100, 1)} % of the direct loop: the rest is the cost of ` +
          `durable workflows (Temporal history writes, task dispatch) and of the PostgreSQL records per execution.`
        : 'No card-execution measurement in this invocation to compare with: run `npm run bench -- --scenario throughput,direct`.',
      cpuNote(window.cpu),
      `The bench sent no Temporal work in this window: the Temporal server's ` +
        `${Math.round(window.cpu.temporal * 100)} % of a core is other users' load, a baseline to subtract from the ` +
        `throughput scenario's Temporal figure.`,
    ],
  };
};
