/**
 * priority: the steady load plus request-checks at a fixed rate on cards that are otherwise
 * polled only once a day → request → first gateway call latency (the simulator's per-card
 * last-call time, read every few ms) and request → execution start (card_execution), and the
 * effect on normal-lane lateness: a baseline window without requests, then a window with them.
 */
import { createPollingConfig } from '../../src/db/pollingConfigs.js';
import { requestCheck } from '../../src/polling/temporalControl.js';
import type { ScopedCard } from '../../src/domain/card.js';
import { windowSeconds, type Scenario } from '../lib/context.js';
import { createBenchStack, type BenchStack } from '../lib/stack.js';
import { addCards, seedAccount, type SeededAccount } from '../lib/seed.js';
import { cpuNote, measureWindow } from '../lib/window.js';
import { latenessBetween } from '../lib/measure.js';
import { distribution, round, sleep } from '../lib/stats.js';
import { STEADY_INTERVAL_SEC, STEADY_LOAD, steadySpecs } from './steadyLoad.js';
import { LATENESS_P99_LIMIT_MS } from './steady.js';
import { capacityNote } from '../lib/previous.js';

/** §11 expectation for request-check → gateway call. */
const PRIORITY_P99_LIMIT_MS = 3000;
/** Requested cards are polled daily: their own schedule (jittered over 2.4 h) rarely meets the run. */
const REQUEST_CARD_INTERVAL_SEC = 86_400;
/** How often the bench looks at the requested cards' last-call times. */
const WATCH_EVERY_MS = 10;
/** Requests still unanswered this long after the window are reported as unanswered. */
const DRAIN_MS = 15_000;

interface Pending {
  readonly card: ScopedCard;
  readonly carrierId: string;
  readonly requestedAt: number;
  status?: string;
  firstCallAt?: number;
}

async function addRequestCards(stack: BenchStack, account: SeededAccount, count: number): Promise<ScopedCard[]> {
  // A higher-priority config for status 'test' gives these cards a daily interval in the same account.
  await createPollingConfig(stack.pool, {
    name: `${account.spec.name}-requested`,
    priority: 20,
    match: { carrierId: account.carrier.id, cardStatus: 'test' },
    intervalsSec: { card_status: REQUEST_CARD_INTERVAL_SEC },
  });
  return addCards(stack, account.carrier.id, account.serial, account.spec.cards, count, 'test');
}

/** Sends one request-check every 1/rate s until `until`, alternating accounts. */
/**
 * Returns once the last request is sent: the window must not stretch while slow updates answer,
 * so their answers go to `inFlight` for the caller to await afterwards.
 */
async function sendRequests(stack: BenchStack, pools: { carrierId: string; cards: ScopedCard[] }[], rate: number, until: number, sent: Pending[], inFlight: Promise<void>[]): Promise<void> {
  const everyMs = 1000 / rate;
  for (let i = 0; Date.now() < until; i += 1) {
    const target = pools[i % pools.length]!;
    const card = target.cards.shift();
    if (!card) break;
    const pending: Pending = { card, carrierId: target.carrierId, requestedAt: Date.now() };
    sent.push(pending);
    inFlight.push(
      requestCheck(stack.ref, target.carrierId, { cardId: card.id, types: ['card_status'], actor: 'bench', source: 'bench' }).then(
        (result) => void (pending.status = result.status),
        (error: unknown) => void (pending.status = `error: ${String(error)}`),
      ),
    );
    // Fixed rate: the next request goes out on schedule whatever this one's answer time.
    await sleep(Math.max(0, pending.requestedAt + everyMs - Date.now()));
  }
}

/** Polls the simulator's per-card last-call time of requested cards until `stop()` resolves. */
function watchFirstCalls(stack: BenchStack, sent: Pending[]): { stop: () => void } {
  const timer = setInterval(() => {
    for (const pending of sent) {
      if (pending.firstCallAt !== undefined) continue;
      const lastCallAt = stack.simulator.world.cards.get(pending.card.iccid)?.lastCallAt;
      if (lastCallAt !== undefined && lastCallAt >= pending.requestedAt) pending.firstCallAt = lastCallAt;
    }
  }, WATCH_EVERY_MS);
  return { stop: () => clearInterval(timer) };
}

export const priority: Scenario = async (context) => {
  const seconds = windowSeconds(context, { warmupSec: STEADY_INTERVAL_SEC + 5, durationSec: 40 });
  const baselineSec = Math.max(10, Math.round(seconds.durationSec / 2));
  const rate = context.options.requestRate;
  const stack = await createBenchStack(context.config, 'priority');
  try {
    const accounts: SeededAccount[] = [];
    for (const spec of steadySpecs('p')) accounts.push(await seedAccount(stack, spec));
    const perAccount = Math.ceil((rate * seconds.durationSec) / accounts.length) + 2;
    const pools: { carrierId: string; cards: ScopedCard[] }[] = [];
    for (const account of accounts) pools.push({ carrierId: account.carrier.id, cards: await addRequestCards(stack, account, perAccount) });
    await stack.startOrchestration();

    context.log(`baseline window without requests (${baselineSec} s)`);
    const baseline = await measureWindow(stack, { warmupSec: seconds.warmupSec, durationSec: baselineSec }, context.log);
    const sent: Pending[] = [];
    const watcher = watchFirstCalls(stack, sent);
    context.log(`window with ${rate} request-checks/s`);
    const answers: Promise<void>[] = [];
    const loaded = await measureWindow(stack, { warmupSec: 0, durationSec: seconds.durationSec }, context.log, (until) => sendRequests(stack, pools, rate, until, sent, answers));
    await Promise.all(answers);
    const drainUntil = Date.now() + DRAIN_MS;
    while (Date.now() < drainUntil && sent.some((p) => p.status === 'requested' && p.firstCallAt === undefined)) await sleep(100);
    watcher.stop();

    const requested = sent.filter((p) => p.status === 'requested');
    const answered = requested.filter((p) => p.firstCallAt !== undefined);
    const toCall = distribution(answered.map((p) => p.firstCallAt! - p.requestedAt));
    // Request → execution start, from the priority executions recorded in PostgreSQL.
    const { rows } = await stack.pool.query<{ card_id: string; started_at: Date }>(
      'SELECT card_id::text, started_at FROM card_execution WHERE from_priority AND card_id = ANY($1::bigint[]) ORDER BY started_at',
      [requested.map((p) => p.card.id)],
    );
    const starts = requested.flatMap((p) => {
      const row = rows.find((r) => r.card_id === p.card.id && r.started_at.getTime() >= p.requestedAt - 5);
      return row ? [row.started_at.getTime() - p.requestedAt] : [];
    });
    const toStart = distribution(starts);
    const normalBefore = await latenessBetween(stack.pool, baseline.from, baseline.to, 'NOT from_priority');
    const normalDuring = await latenessBetween(stack.pool, loaded.from, loaded.to, 'NOT from_priority');
    const statuses: Record<string, number> = {};
    for (const p of sent) statuses[p.status ?? 'no answer'] = (statuses[p.status ?? 'no answer'] ?? 0) + 1;

    const misses: string[] = [];
    if (toCall.p99 > PRIORITY_P99_LIMIT_MS) misses.push(`request → first gateway call p99 ${toCall.p99} ms > ${PRIORITY_P99_LIMIT_MS} ms.`);
    if (answered.length < requested.length) misses.push(`${requested.length - answered.length} of ${requested.length} requested cards saw no gateway call within ${DRAIN_MS / 1000} s after the window.`);
    if (normalDuring.latenessMs.p99 > LATENESS_P99_LIMIT_MS) misses.push(`normal-lane lateness p99 ${normalDuring.latenessMs.p99} ms > ${LATENESS_P99_LIMIT_MS} ms with requests.`);
    const lateRow = (label: string, w: typeof normalBefore): (string | number)[] => [label, w.executions, w.latenessMs.p50, w.latenessMs.p95, w.latenessMs.p99, w.latenessMs.max];
    return {
      title: 'request-check latency and its effect on the normal lane',
      explain: [
        `Steady load (${STEADY_LOAD * 100} % of the budget) plus ${rate} request-checks/s (requestCheck update on the carrier scheduler, card_status) on cards otherwise polled daily, alternating the two accounts; each card requested once.`,
        `Request → first call: from just before the update is sent to the call's arrival at the simulator (per-card last-call time, read every ${WATCH_EVERY_MS} ms). Request → start: to card_execution.started_at of the priority execution.`,
      ],
      config: { ...seconds, baselineSec, requestRate: rate, requestCardIntervalSec: REQUEST_CARD_INTERVAL_SEC },
      results: { sent: sent.length, statuses, answered: answered.length, requestToFirstCallMs: toCall, requestToStartMs: toStart, normalBefore, normalDuring, cpuShares: loaded.cpu },
      tables: [
        {
          headers: ['request-checks', 'n', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms'],
          numeric: [false, true, true, true, true, true],
          rows: [
            ['request → first gateway call', toCall.n, toCall.p50, toCall.p95, toCall.p99, toCall.max],
            ['request → execution start', toStart.n, toStart.p50, toStart.p95, toStart.p99, toStart.max],
          ],
        },
        {
          headers: ['normal-lane lateness', 'executions', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms'],
          numeric: [false, true, true, true, true, true],
          rows: [lateRow(`without requests (${round(baseline.seconds)} s)`, normalBefore), lateRow(`with ${rate}/s requests (${round(loaded.seconds)} s)`, normalDuring)],
        },
      ],
      misses,
      notes: [
        `Request statuses: ${Object.entries(statuses).map(([s, n]) => `${s} ${n}`).join(', ')}. A request made through the update is claimed at the scheduler's next one-second tick (only the signal path wakes the loop early), so about 500 ms of the median is the tick phase.`,
        capacityNote(context, (normalDuring.executions + toStart.n) / loaded.seconds, (accounts.reduce((n, a) => n + a.cards.length, 0) / STEADY_INTERVAL_SEC) + rate),
        cpuNote(loaded.cpu),
      ],
    };
  } finally {
    await stack.close();
  }
};
