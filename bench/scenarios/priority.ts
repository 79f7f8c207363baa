/**
 * priority: a normal lane in backlog (cards due at 1.5× the feasible load — min(budget, measured
 * orchestration capacity)) plus request-checks at a fixed rate on cards that are otherwise polled
 * only once a day → request → first gateway call latency (the simulator's per-card last-call time,
 * read every few ms) and request → execution start (card_execution), with the normal lane's due
 * backlog sampled every second to show the target's condition held; normal-lane lateness in a
 * baseline window without requests and in the window with them.
 */
import { createPollingConfig } from '../../src/db/pollingConfigs.js';
import { serveRequestCheck } from '../../src/app/requestCheckService.js';
import type { ScopedCard } from '../../src/domain/card.js';
import { windowSeconds, type Scenario } from '../lib/context.js';
import { createBenchStack, type BenchStack } from '../lib/stack.js';
import { addCards, seedAccount, type SeededAccount } from '../lib/seed.js';
import { cpuNote, measureWindow } from '../lib/window.js';
import { latenessBetween } from '../lib/measure.js';
import { distribution, round, sleep } from '../lib/stats.js';
import { STEADY_INTERVAL_SEC, feasibleLoad, steadySpecs } from './steadyLoad.js';
import { capacityNote, orchestrationCapacity } from '../lib/capacity.js';
import { accountKeys } from '../../src/redis/keys.js';
import { schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { atMost, none, notChecked, seconds as inSeconds, type Verdict } from '../lib/verdict.js';

/** Target for request-check → gateway call while the normal lane has a backlog. */
const PRIORITY_P99_LIMIT_MS = 2000;
/** Normal-lane load ÷ feasible load: above 1, so the normal lane keeps a backlog. */
const NORMAL_LOAD = 1.5;
/** Share of backlog samples (every account non-empty) below which the target's condition did not hold. */
const BACKLOG_SAMPLES_MIN = 0.9;
/** Requested cards are polled daily: their own schedule (jittered over 2.4 h) rarely meets the run. */
const REQUEST_CARD_INTERVAL_SEC = 86_400;
/**
 * How often the bench reads the requested cards' last-call times (GET /sim/stats from the simulator's
 * process). The time is the simulator's stamp, so this only bounds how soon a later call of the same
 * card could hide the first: requested cards are otherwise polled daily.
 */
const WATCH_EVERY_MS = 100;
/** Requests still unanswered this long after the window are reported as unanswered. */
const DRAIN_MS = 15_000;

export interface Pending {
  readonly card: ScopedCard;
  readonly carrierId: string;
  readonly requestedAt: number;
  status?: string;
  /** When the update answered (the card was in the priority lane by then). */
  answeredAt?: number;
  startedAt?: number;
  firstCallAt?: number;
}

export async function addRequestCards(stack: BenchStack, account: SeededAccount, count: number): Promise<ScopedCard[]> {
  // A higher-priority config for status 'test' gives these cards a daily interval in the same account.
  await createPollingConfig(stack.pool, {
    name: `${account.spec.name}-requested`,
    priority: 20,
    match: { carrierId: account.carrier.id, cardStatus: 'test' },
    intervalsSec: { card_status: REQUEST_CARD_INTERVAL_SEC },
  });
  return addCards(stack, account.carrier.id, account.serial, account.spec.cards, count, 'test');
}

/**
 * Sends one request-check every 1/rate s until `until`, alternating accounts. Returns once the
 * last request is sent: the window must not stretch while slow updates answer,
 * so their answers go to `inFlight` for the caller to await afterwards.
 */
export async function sendRequests(
  stack: BenchStack,
  pools: { carrierId: string; cards: ScopedCard[] }[],
  rate: number,
  until: number,
  sent: Pending[],
  inFlight: Promise<void>[],
  /** As the API serves it (src/api/routes/requestCheck.ts): a wake for a workflow loop only. */
  options: { readonly wake: boolean } = { wake: stack.config.SCHEDULER_LOOP === 'workflow' },
): Promise<void> {
  const everyMs = 1000 / rate;
  for (let i = 0; Date.now() < until; i += 1) {
    const target = pools[i % pools.length]!;
    const card = target.cards.shift();
    if (!card) break;
    const pending: Pending = { card, carrierId: target.carrierId, requestedAt: Date.now() };
    sent.push(pending);
    inFlight.push(
      // As the API serves it (src/app/requestCheckService.ts): the service, then the scheduler woken.
      serveRequestCheck(
        stack.ref,
        stack.services.requests,
        target.carrierId,
        {
          cardId: card.id,
          types: ['card_status'],
          actor: 'bench',
          source: 'bench',
        },
        options,
      ).then(
        (result) => {
          pending.status = result.status;
          pending.answeredAt = Date.now();
        },
        (error: unknown) => void (pending.status = `error: ${String(error)}`),
      ),
    );
    // Fixed rate: the next request goes out on schedule whatever this one's answer time.
    await sleep(Math.max(0, pending.requestedAt + everyMs - Date.now()));
  }
}

interface BacklogWatch {
  stop(): { samples: number; withBacklog: number; minDue: number; meanDue: number };
}

/** Every second: cards due now in each account's normal lane (ZCOUNT −inf..now); a backlog = all accounts > 0. */
function watchBacklog(stack: BenchStack, carrierIds: readonly string[]): BacklogWatch {
  const counts: number[][] = [];
  const timer = setInterval(() => {
    const now = Date.now();
    void Promise.all(carrierIds.map((id) => stack.deps.redis.zcount(accountKeys(stack.namespace, id).queue, '-inf', now))).then(
      (sample) => void counts.push(sample),
      () => undefined,
    );
  }, 1000);
  return {
    stop() {
      clearInterval(timer);
      const totals = counts.map((sample) => sample.reduce((a, b) => a + b, 0));
      return {
        samples: counts.length,
        withBacklog: counts.filter((sample) => sample.every((n) => n > 0)).length,
        minDue: totals.length > 0 ? Math.min(...totals) : 0,
        meanDue: totals.length > 0 ? round(totals.reduce((a, b) => a + b, 0) / totals.length, 1) : 0,
      };
    },
  };
}

/** Polls the simulator's per-card last-call time of requested cards (every `everyMs`) until `stop()` resolves. */
export function watchFirstCalls(stack: BenchStack, sent: Pending[], everyMs = WATCH_EVERY_MS): { stop: () => Promise<void> } {
  let watching = true;
  const loop = (async () => {
    while (watching) {
      const waiting = sent.filter((pending) => pending.firstCallAt === undefined);
      // A stats call that fails is retried on the next round: the stamps stay in the simulator.
      const cards = waiting.length === 0 ? {} : ((await stack.simulator.stats().catch(() => undefined))?.cards ?? {});
      for (const pending of waiting) {
        const lastCallAt = cards[pending.card.iccid]?.lastCallAt;
        if (lastCallAt !== undefined && lastCallAt >= pending.requestedAt) pending.firstCallAt = lastCallAt;
      }
      await sleep(everyMs);
    }
  })();
  return {
    stop: async () => {
      watching = false;
      await loop;
    },
  };
}

export const priority: Scenario = async (context) => {
  const seconds = windowSeconds(context, { warmupSec: STEADY_INTERVAL_SEC + 5, durationSec: 40 });
  const baselineSec = Math.max(10, Math.round(seconds.durationSec / 2));
  const rate = context.options.requestRate;
  const capacity = await orchestrationCapacity(context);
  const feasible = feasibleLoad(capacity.perSecond);
  const stack = await createBenchStack(context.config, 'priority');
  try {
    const accounts: SeededAccount[] = [];
    for (const spec of steadySpecs('p', feasible, NORMAL_LOAD)) accounts.push(await seedAccount(stack, spec));
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
    const backlogWatch = watchBacklog(
      stack,
      accounts.map((a) => a.carrier.id),
    );
    const loaded = await measureWindow(stack, { warmupSec: 0, durationSec: seconds.durationSec }, context.log, (until) =>
      sendRequests(stack, pools, rate, until, sent, answers),
    );
    const backlog = backlogWatch.stop();
    await Promise.all(answers);
    const drainUntil = Date.now() + DRAIN_MS;
    while (Date.now() < drainUntil && sent.some((p) => p.status === 'requested' && p.firstCallAt === undefined)) await sleep(100);
    await watcher.stop();

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
      if (row) p.startedAt = row.started_at.getTime();
      return row ? [row.started_at.getTime() - p.requestedAt] : [];
    });
    const toStart = distribution(starts);
    const toAnswer = distribution(requested.flatMap((p) => (p.answeredAt === undefined ? [] : [p.answeredAt - p.requestedAt])));
    const normalBefore = await latenessBetween(stack.pool, baseline.from, baseline.to, 'NOT from_priority');
    const normalDuring = await latenessBetween(stack.pool, loaded.from, loaded.to, 'NOT from_priority');
    const statuses: Record<string, number> = {};
    for (const p of sent) statuses[p.status ?? 'no answer'] = (statuses[p.status ?? 'no answer'] ?? 0) + 1;

    const what = 'request → first gateway call p99';
    const backlogShare = backlog.samples > 0 ? backlog.withBacklog / backlog.samples : 0;
    const backlogText =
      `normal lane in backlog in ${backlog.withBacklog} of ${backlog.samples} one-second samples, due cards min ` +
      `${backlog.minDue}, mean ${backlog.meanDue}`;
    const verdicts: Verdict[] = [
      answered.length === 0
        ? notChecked(what, `≤ ${inSeconds(PRIORITY_P99_LIMIT_MS)}`, 'no request was answered')
        : backlogShare < BACKLOG_SAMPLES_MIN
          ? notChecked(
              what,
              `≤ ${inSeconds(PRIORITY_P99_LIMIT_MS)} with a normal-lane backlog`,
              `the condition did not hold: ${backlogText}; p99 was ${inSeconds(toCall.p99)}`,
            )
          : atMost(what, toCall.p99, PRIORITY_P99_LIMIT_MS, inSeconds, `${toCall.n} requests; ${backlogText}`),
      none(`requested cards without a gateway call ${DRAIN_MS / 1000} s after the window`, requested.length - answered.length, `of ${requested.length}`),
    ];
    const lateRow = (label: string, w: typeof normalBefore): (string | number)[] => [
      label,
      w.executions,
      w.latenessMs.p50,
      w.latenessMs.p95,
      w.latenessMs.p99,
      w.latenessMs.max,
    ];
    return {
      title: 'request-check latency and its effect on the normal lane',
      explain: [
        `Normal lane: cards due at ${NORMAL_LOAD * 100} % of the feasible load, ${feasible.feasibleQps}/s = ` +
          `min(${feasible.budgetQps} QPS of budgets, capacity ${capacity.perSecond} executions/s: ${capacity.source}), so it keeps a backlog. ` +
          `Plus ${rate} request-checks/s (requestCheck update on the carrier scheduler, card_status) on cards otherwise ` +
          `polled daily, alternating the two accounts; each card requested once.`,
        `Request → first call: from just before the update is sent to the call's arrival at the simulator (per-card ` +
          `last-call time, read every ${WATCH_EVERY_MS} ms). Request → start: to card_execution.started_at of the ` +
          `priority execution.`,
      ],
      config: {
        ...seconds,
        baselineSec,
        requestRate: rate,
        requestCardIntervalSec: REQUEST_CARD_INTERVAL_SEC,
        normalLoad: NORMAL_LOAD,
        capacityPerSecond: capacity.perSecond,
        feasibleQps: feasible.feasibleQps,
      },
      results: {
        sent: sent.length,
        statuses,
        answered: answered.length,
        requestToFirstCallMs: toCall,
        requestToStartMs: toStart,
        backlog,
        capacity,
        feasible,
        normalBefore,
        normalDuring,
        cpuShares: loaded.cpu,
      },
      tables: [
        {
          headers: ['request-checks', 'n', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms'],
          numeric: [false, true, true, true, true, true],
          rows: [
            ['request → first gateway call', toCall.n, toCall.p50, toCall.p95, toCall.p99, toCall.max],
            ['request → update answered', toAnswer.n, toAnswer.p50, toAnswer.p95, toAnswer.p99, toAnswer.max],
            ['request → execution start', toStart.n, toStart.p50, toStart.p95, toStart.p99, toStart.max],
          ],
        },
        {
          headers: ['normal-lane lateness', 'executions', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms'],
          numeric: [false, true, true, true, true, true],
          rows: [
            lateRow(`without requests (${round(baseline.seconds)} s)`, normalBefore),
            lateRow(`with ${rate}/s requests (${round(loaded.seconds)} s)`, normalDuring),
          ],
        },
      ],
      verdicts,
      notes: [
        `Request statuses: ${Object.entries(statuses)
          .map(([s, n]) => `${s} ${n}`)
          .join(', ')}. ` + 'An answered update wakes the scheduler at once: its next round claims the card from the priority lane.',
        slowestNote(answered),
        await rolloverNote(
          stack,
          pools.map((p) => p.carrierId),
          loaded.from,
          loaded.to,
        ),
        'Normal-lane lateness grows in both windows by design (the lane is in backlog); the comparison shows what the requests take from it.',
        capacityNote(
          capacity,
          (normalDuring.executions + toStart.n) / loaded.seconds,
          accounts.reduce((n, a) => n + a.cards.length, 0) / STEADY_INTERVAL_SEC + rate,
        ),
        cpuNote(loaded.cpu),
      ],
    };
  } finally {
    await stack.close();
  }
};

/** The three slowest requests, phase by phase: where a long wait was spent. */
function slowestNote(answered: readonly Pending[]): string {
  const since = (p: Pending, at: number | undefined): string => (at === undefined ? '?' : `${at - p.requestedAt} ms`);
  const slowest = [...answered].sort((a, b) => b.firstCallAt! - b.requestedAt - (a.firstCallAt! - a.requestedAt)).slice(0, 3);
  if (slowest.length === 0) return 'Slowest requests: none answered.';
  return (
    'Slowest requests (from the request: update answered / execution start / first gateway call): ' +
    slowest
      .map(
        (p) =>
          `${new Date(p.requestedAt).toISOString().slice(11, 23)} ${p.carrierId}: ${since(p, p.answeredAt)} / ${since(p, p.startedAt)} / ${since(p, p.firstCallAt)}`,
      )
      .join('; ') +
    '.'
  );
}

/** When each scheduler continued-as-new during the window (a request can meet the rollover). */
async function rolloverNote(stack: BenchStack, carrierIds: readonly string[], from: Date, to: Date): Promise<string> {
  const parts: string[] = [];
  for (const carrierId of carrierIds) {
    const id = schedulerWorkflowId(carrierId, stack.ref.workflowIdPrefix);
    const times: string[] = [];
    for await (const run of stack.ref.client.workflow.list({ query: `WorkflowId = '${id}'` })) {
      const closed = run.closeTime?.getTime();
      if (closed !== undefined && closed >= from.getTime() && closed <= to.getTime()) times.push(new Date(closed).toISOString().slice(11, 23));
    }
    parts.push(`${carrierId}: ${times.length === 0 ? 'none' : times.sort().join(', ')}`);
  }
  return `Scheduler runs that continued-as-new in the window (close time): ${parts.join('; ')}.`;
}
