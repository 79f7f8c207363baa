/**
 * freshness (docs/design.md, 'Freshness'; issue 47): how soon the product knows a change at the
 * carrier, per strategy, on one account the budget cannot sweep quickly: 20 000 cards on 5 QPS (a
 * one-card-per-call status sweep takes 4 000 s), 1 % of the cards changing `card_status` per hour
 * (about 3 a minute). The simulator is the ground truth: it stamps every change and counts it
 * learned at the first answer, or the first pushed event answered 2xx, that carried it.
 *
 * - `polling`: scheduled status checks alone (interval 4 000 s, first dues spread over it).
 * - `events`: the same, and the simulator pushes each change to POST /v1/events of a listening API
 *   (signed with the account's event secret); after the window, a burst of 2 000 events/s for
 *   `BURST_SEC` to the same API: events accepted, refused (429), lost (accepted without their
 *   observation) and duplicated, and how long the applier took to apply them.
 *
 * Bulk queries and change feeds are not built yet; the table says so.
 */
import { randomUUID } from 'node:crypto';
import { buildApiServer } from '../../src/api/server.js';
import { updateCarrier } from '../../src/db/carriers.js';
import { ACCOUNT_HEADER, SIGNATURE_HEADER, signEvents } from '../../src/gateway/events.js';
import type { FreshnessStats } from '../../src/simulator/model.js';
import { windowSeconds, type Scenario, type ScenarioContext } from '../lib/context.js';
import { createBenchStack, type BenchStack } from '../lib/stack.js';
import { seedAccount, spreadDues, type AccountSpec, type SeededAccount } from '../lib/seed.js';
import { noopCeiling } from '../lib/capacity.js';
import type { Table } from '../lib/report.js';
import { round, sleep } from '../lib/stats.js';
import { atLeast, atMost, none, seconds as inSeconds, type Verdict } from '../lib/verdict.js';

const INTERVAL_SEC = 4000;
const ACCOUNT: AccountSpec = {
  name: 'fresh',
  qps: { status: 5 },
  typeGroups: { card_status: 'status' },
  cards: 20_000,
  intervalsSec: { card_status: INTERVAL_SEC },
  latencyMs: { p50: 20, p99: 80 },
};
/** 1 % of the cards per hour. */
const CHANGE_RATE_PER_CARD_HOUR = 0.01;
const SECRET = 'freshness-bench-event-secret';
const STRATEGIES = ['polling', 'events'] as const;
type Strategy = (typeof STRATEGIES)[number];
/** The pushed-events target: staleness p99 of the changes found. */
const EVENTS_P99_MAX_MS = 2000;
const BURST_RATE = 2000;
const BURST_SEC = 60;
const BURST_BATCH = 100;
const APPLY_LIMIT_MS = 300_000;

interface Burst {
  readonly sent: number;
  readonly accepted: number;
  readonly refused: number;
  readonly failedRequests: number;
  readonly sendSeconds: number;
  /** From the first request to the last event applied. */
  readonly appliedSeconds: number;
  readonly observations: number;
  readonly lost: number;
  readonly duplicated: number;
}

interface FreshnessRun {
  readonly strategy: Strategy;
  readonly windowSeconds: number;
  readonly truth: FreshnessStats | undefined;
  readonly callsPerSecond: number;
  readonly budgetShare: number;
  readonly pushed: number;
  readonly product: { readonly changes: number; readonly p50Ms: number; readonly p99Ms: number } | undefined;
  readonly burst?: Burst;
}

async function listeningApi(stack: BenchStack): Promise<{ url: string; close: () => Promise<void> }> {
  const app = await buildApiServer({ config: stack.config, deps: stack.deps, services: stack.services, orchestration: stack.ref }, { logLevel: 'silent' });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return { url, close: () => app.close() };
}

async function callsOf(stack: BenchStack, gatewayAccount: string): Promise<number> {
  return Object.values((await stack.simulator.stats({ cards: false })).accounts[gatewayAccount]?.groups ?? {}).reduce((n, g) => n + g.calls, 0);
}

/** 2 000 events a second for BURST_SEC, in requests of BURST_BATCH, each event new, for random cards of the account. */
async function burst(stack: BenchStack, account: SeededAccount, apiUrl: string, log: (line: string) => void): Promise<Burst> {
  const runTag = randomUUID().slice(0, 8);
  const perTick = BURST_RATE / 10;
  const started = Date.now();
  let sent = 0;
  let accepted = 0;
  let refused = 0;
  let failedRequests = 0;
  const inFlight = new Set<Promise<void>>();
  const post = async (events: unknown[]): Promise<void> => {
    const body = JSON.stringify({ events });
    try {
      const res = await fetch(`${apiUrl}/v1/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', [ACCOUNT_HEADER]: account.gatewayAccount, [SIGNATURE_HEADER]: signEvents(SECRET, body, Date.now()) },
        body,
      });
      if (res.status === 202) accepted += ((await res.json()) as { accepted: number }).accepted;
      else if (res.status === 429) refused += events.length;
      else failedRequests += 1;
    } catch {
      failedRequests += 1;
    }
  };
  for (let tick = 0; tick < BURST_SEC * 10; tick += 1) {
    const due = started + tick * 100;
    if (due > Date.now()) await sleep(due - Date.now());
    for (let i = 0; i < perTick; i += BURST_BATCH) {
      const events = Array.from({ length: Math.min(BURST_BATCH, perTick - i) }, () => {
        sent += 1;
        const card = account.cards[Math.floor(Math.random() * account.cards.length)]!;
        return {
          id: `burst-${runTag}-${sent}`,
          type: 'card_status',
          iccid: card.iccid,
          observedAt: new Date().toISOString(),
          observation: { network: sent % 2 === 0 ? 'online' : 'offline', status: 'active' },
        };
      });
      const request = post(events).finally(() => inFlight.delete(request));
      inFlight.add(request);
    }
  }
  await Promise.all([...inFlight]);
  const sendSeconds = (Date.now() - started) / 1000;
  log(`burst: ${sent} events sent in ${round(sendSeconds, 1)} s, ${accepted} accepted, ${refused} refused (429), ${failedRequests} requests failed`);
  const prefix = `event:${account.carrier.id}:burst-${runTag}-`;
  const limit = Date.now() + APPLY_LIMIT_MS;
  for (;;) {
    const { rows } = await stack.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM carrier_event WHERE carrier_id = $1::bigint AND status = 'pending' AND event_id LIKE $2",
      [account.carrier.id, `burst-${runTag}-%`],
    );
    if ((rows[0]?.n ?? 0) === 0 || Date.now() > limit) break;
    await sleep(250);
  }
  const appliedSeconds = (Date.now() - started) / 1000;
  const { rows: observed } = await stack.pool.query<{ n: number; distinct_ids: number }>(
    'SELECT count(*)::int AS n, count(DISTINCT observation_id)::int AS distinct_ids FROM card_observation WHERE observation_id LIKE $1',
    [`${prefix}%`],
  );
  const observations = observed[0]?.n ?? 0;
  return {
    sent,
    accepted,
    refused,
    failedRequests,
    sendSeconds: round(sendSeconds, 1),
    appliedSeconds: round(appliedSeconds, 1),
    observations,
    lost: Math.max(0, accepted - (observed[0]?.distinct_ids ?? 0)),
    duplicated: observations - (observed[0]?.distinct_ids ?? 0),
  };
}

async function freshnessRun(context: ScenarioContext, strategy: Strategy, seconds: { warmupSec: number; durationSec: number }): Promise<FreshnessRun> {
  const log = (line: string): void => context.log(`${strategy}: ${line}`);
  const stack = await createBenchStack(context.config, `freshness-${strategy}`, { cardRunShape: 'batch', cardStartMode: 'client' });
  let api: { url: string; close: () => Promise<void> } | undefined;
  try {
    const account = await seedAccount(stack, ACCOUNT);
    await spreadDues(stack, account, 'card_status', INTERVAL_SEC * 1000);
    // The simulator knows every card of the account from the start, so drift changes any of them.
    for (let i = 0; i < account.cards.length; i += 5000)
      await stack.simulator.registerCards(
        account.gatewayAccount,
        account.cards.slice(i, i + 5000).map((card) => card.iccid),
      );
    if (strategy === 'events') {
      await updateCarrier(stack.pool, account.carrier.id, { eventSecret: SECRET });
      api = await listeningApi(stack);
      await stack.simulator.push(account.gatewayAccount, { url: `${api.url}/v1/events`, secret: SECRET, types: ['card_status'] });
    }
    await stack.startOrchestration();
    await sleep(seconds.warmupSec * 1000);
    const callsBefore = await callsOf(stack, account.gatewayAccount);
    const from = Date.now();
    await stack.simulator.updateAccount(account.gatewayAccount, { changeRatePerHour: { card_status: CHANGE_RATE_PER_CARD_HOUR } });
    log(`window ${seconds.durationSec} s`);
    await sleep(seconds.durationSec * 1000);
    await stack.simulator.updateAccount(account.gatewayAccount, { changeRatePerHour: {} });
    const to = Date.now();
    const calls = (await callsOf(stack, account.gatewayAccount)) - callsBefore;
    const stats = (await stack.simulator.stats({ cards: false })).accounts[account.gatewayAccount];
    const { rows } = await stack.pool.query<{ changes: number; p50: number | null; p99: number | null }>(
      `SELECT count(*)::int AS changes,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM learned_at - changed_at) * 1000) AS p50,
              percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM learned_at - changed_at) * 1000) AS p99
         FROM card_change WHERE carrier_id = $1::bigint`,
      [account.carrier.id],
    );
    const callsPerSecond = calls / ((to - from) / 1000);
    const run: FreshnessRun = {
      strategy,
      windowSeconds: round((to - from) / 1000, 1),
      truth: stats?.freshness?.card_status,
      callsPerSecond: round(callsPerSecond, 2),
      budgetShare: round(callsPerSecond / (ACCOUNT.qps.status ?? 1), 3),
      pushed: stats?.push?.delivered ?? 0,
      product: rows[0] ? { changes: rows[0].changes, p50Ms: round(rows[0].p50 ?? 0, 0), p99Ms: round(rows[0].p99 ?? 0, 0) } : undefined,
    };
    return strategy === 'events' && api ? { ...run, burst: await burst(stack, account, api.url, log) } : run;
  } finally {
    await api?.close();
    await stack.close();
  }
}

function verdicts(run: FreshnessRun): Verdict[] {
  if (run.strategy !== 'events') return [];
  const found = run.truth ? run.truth.learned / Math.max(1, run.truth.changes) : 0;
  return [
    atMost('events: staleness p99 of the changes found', run.truth?.stalenessMs?.p99 ?? Number.POSITIVE_INFINITY, EVENTS_P99_MAX_MS, inSeconds),
    atLeast('events: share of the changes found in the window', found, 0.99),
    ...(run.burst
      ? [
          atLeast(`events burst: events accepted of ${run.burst.sent} sent at ${BURST_RATE}/s`, run.burst.accepted, run.burst.sent),
          none('events burst: accepted events without their observation', run.burst.lost),
          none('events burst: duplicated observations', run.burst.duplicated),
        ]
      : []),
  ];
}

export const freshness: Scenario = async (context) => {
  const seconds = windowSeconds(context, { warmupSec: 30, durationSec: 600 });
  const ceiling = await noopCeiling(context);
  const runs: FreshnessRun[] = [];
  for (const strategy of STRATEGIES) runs.push(await freshnessRun(context, strategy, seconds));
  const ms = (value: number | undefined): string => (value === undefined ? '–' : String(round(value / 1000, 2)));
  const tables: Table[] = [
    {
      headers: [
        'strategy',
        'window s',
        'changes',
        'found',
        'found %',
        'staleness p50 s',
        'p99 s',
        'max s',
        'calls/s',
        'budget share',
        'checks per call',
        'events pushed',
        'product: changes, p50 s, p99 s (a card’s first observation is a state, not a change)',
      ],
      numeric: [false, true, true, true, true, true, true, true, true, true, true, true, false],
      rows: [
        ...runs.map((run) => [
          run.strategy,
          run.windowSeconds,
          run.truth?.changes ?? 0,
          run.truth?.learned ?? 0,
          round((100 * (run.truth?.learned ?? 0)) / Math.max(1, run.truth?.changes ?? 0), 1),
          ms(run.truth?.stalenessMs?.p50),
          ms(run.truth?.stalenessMs?.p99),
          ms(run.truth?.stalenessMs?.max),
          run.callsPerSecond,
          run.budgetShare,
          1,
          run.pushed,
          run.product ? `${run.product.changes}, ${ms(run.product.p50Ms)}, ${ms(run.product.p99Ms)}` : '–',
        ]),
        ['bulk (K = 50)', '–', '–', '–', '–', '–', '–', '–', '–', '–', '–', '–', 'not built'],
        ['change feed', '–', '–', '–', '–', '–', '–', '–', '–', '–', '–', '–', 'not built'],
      ],
    },
    {
      headers: ['burst', 'sent', 'accepted', 'refused (429)', 'failed requests', 'send s', 'all applied after s', 'observations', 'lost', 'duplicated'],
      numeric: [false, true, true, true, true, true, true, true, true, true],
      rows: runs.flatMap((run) =>
        run.burst
          ? [
              [
                `${BURST_RATE}/s for ${BURST_SEC} s`,
                run.burst.sent,
                run.burst.accepted,
                run.burst.refused,
                run.burst.failedRequests,
                run.burst.sendSeconds,
                run.burst.appliedSeconds,
                run.burst.observations,
                run.burst.lost,
                run.burst.duplicated,
              ],
            ]
          : [],
      ),
    },
  ];
  return {
    title: `Freshness: ${ACCOUNT.cards} cards on ${ACCOUNT.qps.status} QPS, 1 % changing card_status per hour, per strategy`,
    explain: [
      `One account per strategy (a fresh stack each; CARD_RUN_SHAPE=batch, client starts): ${ACCOUNT.cards} cards, card_status every ${INTERVAL_SEC} s ` +
        `(first dues spread over it: a one-card-per-call sweep at ${ACCOUNT.qps.status} QPS), the simulator changing ${CHANGE_RATE_PER_CARD_HOUR * 100} % of the cards per hour during the window. ` +
        'Changes, found and staleness are the simulator’s ground truth (a change is found by the first answer, or pushed event answered 2xx, that carries it); ' +
        'the product column reads card_change (learned at the observation, or at the event’s arrival).',
      `events: the simulator pushes each change (one request per event) to POST /v1/events of an API in the bench process; after the window, ${BURST_RATE} events/s for ${BURST_SEC} s ` +
        `(requests of ${BURST_BATCH}, signed) to the same API, the applier (ingest worker) applying them beside polling.`,
    ],
    config: {
      ...seconds,
      strategies: STRATEGIES.join(','),
      cards: ACCOUNT.cards,
      qps: ACCOUNT.qps.status,
      ceilingWorkflowsPerSecond: ceiling.workflowsPerSecond,
    },
    results: { ceiling, runs },
    tables,
    verdicts: runs.flatMap(verdicts),
    notes: [
      `Ceiling of this run: ${ceiling.workflowsPerSecond} no-activity workflows/s (${context.previous.has('ceiling') ? 'the ceiling scenario' : 'measured in this invocation'}).`,
    ],
  };
};
