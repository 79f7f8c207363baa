/**
 * sweep (docs/design.md §11 'Request-check and priority items'): the priority retry sweep under
 * carrier pushback. An account whose carrier answers every call with a transient error has 600
 * priority items due for their retry at once; each priority run fails, its item goes back to
 * pending with a retry 5 s later (3 attempts, then it fails for good)
 * (src/app/pollingServices.ts), and the account's loop sweeps the due ones back into its priority
 * lane every few rounds (src/activities/control.ts: at most 100 items a sweep, 8 at a time, each a
 * transaction, an audit row and a Lua call). Per scheduler loop, over the window: the longest gap
 * between the account's claim rounds (target ≤ 2 s, bench/lib/roundWatch.ts), the items swept
 * (their audit rows), the items pending and due, the calls the carrier refused, workflow task
 * timeouts and failures of the scheduler.
 */
import { schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import type { SchedulerLoop } from '../../src/workflow-safe/claimLoop.js';
import { windowSeconds, type Scenario, type ScenarioContext } from '../lib/context.js';
import { createBenchStack } from '../lib/stack.js';
import { seedAccount, spreadDues, type AccountSpec } from '../lib/seed.js';
import { noopCeiling } from '../lib/capacity.js';
import { countEvents, emptyCounts, eventsInWindow, type EventCounts } from '../lib/actions.js';
import { schedulerRounds } from '../lib/schedulerRounds.js';
import { longestGap, ROUND_GAP_METRIC, SAMPLE_EVERY_MS, watchRounds, type Gap } from '../lib/roundWatch.js';
import type { Table } from '../lib/report.js';
import { round, sleep } from '../lib/stats.js';
import { atLeast, atMost, none, seconds as inSeconds, type Verdict } from '../lib/verdict.js';

const ACCOUNT: AccountSpec = {
  name: 'sweep',
  qps: { status: 20 },
  typeGroups: { card_status: 'status' },
  cards: 1000,
  intervalsSec: { card_status: 300 },
  latencyMs: { p50: 20, p99: 80 },
};
/** Items due at once, on distinct cards (issue 46: "the priority sweep with 600 due items"). */
const ITEMS = 600;
/** The target: the longest gap between two claim rounds of the account while sweeps run. */
const GAP_MAX_MS = 2000;
/** Pending and due items are counted this often. */
const COUNT_EVERY_MS = 1000;
/** The account's loop is waited for this long before the items land. */
const SCHEDULER_START_LIMIT_MS = 60_000;

interface SweepRun {
  readonly schedulerLoop: SchedulerLoop;
  readonly windowSeconds: number;
  readonly requested: Record<string, number>;
  readonly gap: Gap;
  readonly crossCheck: Gap & { readonly source: string };
  readonly sampleBoundMs: number;
  readonly idleSamples: number;
  /** Items the sweeps requested again in the window (their `priority-retry` audit rows). */
  readonly swept: number;
  /** Items pending (most seen) and, of them, due for their retry (most seen), per count. */
  readonly pendingMax: number;
  readonly dueMax: number;
  /** Priority runs of the account started in the window, and the carrier's answers in it. */
  readonly priorityRuns: number;
  readonly callsAnswered: number;
  readonly tasks: EventCounts;
}

async function sweepRun(context: ScenarioContext, schedulerLoop: SchedulerLoop, seconds: { warmupSec: number; durationSec: number }): Promise<SweepRun> {
  const log = (line: string): void => context.log(`${schedulerLoop} loop: ${line}`);
  const stack = await createBenchStack(context.config, `sweep-${schedulerLoop}`, { schedulerLoop, cardRunShape: 'batch', cardStartMode: 'client' });
  try {
    const account = await seedAccount(stack, ACCOUNT);
    await spreadDues(stack, account, 'card_status', (ACCOUNT.intervalsSec.card_status ?? 60) * 1000);
    // Carrier pushback: every call answered with a transient error, so every priority run fails and retries.
    await stack.simulator.updateAccount(account.gatewayAccount, { errorRate: 1 });
    await stack.startOrchestration();
    const carrierId = account.carrier.id;
    // The account's loop claims before the items land: the window's first gap is a real one.
    const claimingBy = Date.now() + SCHEDULER_START_LIMIT_MS;
    const claiming = async (): Promise<boolean> =>
      ((await stack.deps.registry.getSingleMetric(ROUND_GAP_METRIC)?.get())?.values ?? []).some((value) => value.labels.carrier === carrierId);
    while (!(await claiming())) {
      if (Date.now() > claimingBy) throw new Error(`the account's loop ran no claim round within ${SCHEDULER_START_LIMIT_MS / 1000} s`);
      await sleep(200);
    }
    // 600 items due for their retry at once, as after a carrier outage or a loop that was down
    // while retries came due: pending items of distinct cards whose next run has passed. The
    // sweeps request them again (a merge into each item), the runs fail, the items retry 5 s later.
    const { rowCount } = await stack.pool.query(
      `INSERT INTO polling_priority_item (card_id, status, types, first_actor, first_source, last_actor, last_source, last_triggered_at, next_run_at)
       SELECT id, 'pending', '{card_status}', 'bench', 'bench', 'bench', 'bench', now(), now() - interval '1 second'
         FROM iot_card WHERE carrier_id = $1::bigint ORDER BY id LIMIT $2`,
      [carrierId, ITEMS],
    );
    const requested = { 'due at once': rowCount ?? 0 };
    await sleep(seconds.warmupSec * 1000);

    const rounds = watchRounds(stack, carrierId, schedulerLoop);
    const from = Date.now();
    const callsBefore = Object.values((await stack.simulator.stats({ cards: false })).accounts[account.gatewayAccount]?.groups ?? {}).reduce(
      (n, g) => n + g.calls,
      0,
    );
    let pendingMax = 0;
    let dueMax = 0;
    log(`window ${seconds.durationSec} s`);
    while (Date.now() - from < seconds.durationSec * 1000) {
      const { rows } = await stack.pool.query<{ pending: number; due: number }>(
        `SELECT count(*)::int AS pending, count(*) FILTER (WHERE i.next_run_at <= now())::int AS due
           FROM polling_priority_item i JOIN iot_card c ON c.id = i.card_id WHERE c.carrier_id = $1::bigint AND i.status = 'pending'`,
        [carrierId],
      );
      pendingMax = Math.max(pendingMax, rows[0]?.pending ?? 0);
      dueMax = Math.max(dueMax, rows[0]?.due ?? 0);
      await sleep(COUNT_EVERY_MS);
    }
    const to = Date.now();
    const samples = await rounds.stop();
    const callsAfter = Object.values((await stack.simulator.stats({ cards: false })).accounts[account.gatewayAccount]?.groups ?? {}).reduce(
      (n, g) => n + g.calls,
      0,
    );
    const schedulerId = schedulerWorkflowId(carrierId, stack.ref.workflowIdPrefix);
    const crossCheck =
      schedulerLoop === 'activity'
        ? { ...longestGap(samples.viewChanges, from, to), source: "the loop view's round counter (Redis), seen to change" }
        : await schedulerRounds(stack.client, schedulerId, new Date(from), new Date(to)).then((r) => ({
            ms: r.longestGapMs,
            from: r.longestGapFrom,
            rounds: r.rounds,
            source: "the history's claimRound markers",
          }));
    const { rows: swept } = await stack.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM audit_log WHERE source = 'priority-retry' AND occurred_at >= $1 AND occurred_at < $2",
      [new Date(from), new Date(to)],
    );
    const { rows: runs } = await stack.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM card_execution WHERE carrier_id = $1::bigint AND from_priority AND started_at >= $2 AND started_at < $3',
      [carrierId, new Date(from), new Date(to)],
    );
    const tasks = emptyCounts();
    countEvents(await eventsInWindow(stack.client, schedulerId, new Date(from), new Date(to)), tasks);
    return {
      schedulerLoop,
      windowSeconds: round((to - from) / 1000, 1),
      requested,
      gap: longestGap(samples.gaugeRounds, from, to),
      crossCheck,
      sampleBoundMs: samples.longestSampleIntervalMs,
      idleSamples: samples.idleSamples,
      swept: swept[0]?.n ?? 0,
      pendingMax,
      dueMax,
      priorityRuns: runs[0]?.n ?? 0,
      callsAnswered: callsAfter - callsBefore,
      tasks,
    };
  } finally {
    await stack.close();
  }
}

function verdicts(run: SweepRun): Verdict[] {
  return [
    // Without sweeps in the window the gap says nothing: every item should come due at least once.
    atLeast(`${run.schedulerLoop} loop: items the sweeps requested again in the window`, run.swept, ITEMS),
    atMost(`${run.schedulerLoop} loop: longest gap between the account's claim rounds while sweeps run`, run.gap.ms, GAP_MAX_MS, inSeconds),
    none(`${run.schedulerLoop} loop: scheduler workflow task timeouts`, run.tasks.workflowTaskTimeouts),
  ];
}

export const sweep: Scenario = async (context) => {
  // The window opens with the 600 items due: the first sweeps take them 100 at a time.
  const seconds = windowSeconds(context, { warmupSec: 0, durationSec: 90 });
  const ceiling = await noopCeiling(context);
  const runs: SweepRun[] = [];
  for (const loop of context.options.schedulerLoops) runs.push(await sweepRun(context, loop, seconds));
  const tables: Table[] = [
    {
      headers: [
        'loop',
        'window s',
        'items',
        'items swept',
        'pending (most)',
        'due (most)',
        'priority runs',
        'carrier answers (all errors)',
        'longest round gap s',
        'cross-check s',
        'seen late by ≤ s',
        'WFT timeouts',
        'WFT failures',
      ],
      numeric: [false, true, false, true, true, true, true, true, true, true, true, true, true],
      rows: runs.map((run) => [
        run.schedulerLoop,
        run.windowSeconds,
        Object.entries(run.requested)
          .map(([status, n]) => `${status} ${n}`)
          .join(', '),
        run.swept,
        run.pendingMax,
        run.dueMax,
        run.priorityRuns,
        run.callsAnswered,
        round(run.gap.ms / 1000, 2),
        round(run.crossCheck.ms / 1000, 2),
        round(run.sampleBoundMs / 1000, 2),
        run.tasks.workflowTaskTimeouts,
        run.tasks.workflowTaskFailures,
      ]),
    },
  ];
  return {
    title: `Priority retry sweep under carrier pushback: ${ITEMS} items due at once, the account's claim rounds`,
    explain: [
      `Per scheduler loop (SCHEDULER_LOOP, CARD_RUN_SHAPE=batch, client starts; a fresh stack each): one account of ${ACCOUNT.cards} cards (card_status every ` +
        `${ACCOUNT.intervalsSec.card_status} s, first dues spread) on ${ACCOUNT.qps.status} QPS whose carrier answers every call with a transient error (simulator errorRate 1). ` +
        `Once its loop claims, ${ITEMS} pending priority items of distinct cards due for their retry at once (inserted as a carrier outage or a loop that was down leaves them); ` +
        'the sweeps request them again, each priority run fails and its item retries 5 s later (3 attempts), swept back by the loop.',
      `Warm-up ${seconds.warmupSec} s, then a window of ${seconds.durationSec} s. Round gaps: the round time the claim round stamps in ${ROUND_GAP_METRIC}, read every ` +
        `${SAMPLE_EVERY_MS} ms (a gap is seen late by at most the bound in the table, never early), the last round to the window's end included; cross-check: the activity ` +
        "loop's published view or the workflow loop's claimRound markers. Items swept: audit rows of source priority-retry in the window; pending and due: counted every second.",
    ],
    config: {
      ...seconds,
      schedulerLoops: context.options.schedulerLoops.join(','),
      items: ITEMS,
      qps: ACCOUNT.qps.status,
      ceilingWorkflowsPerSecond: ceiling.workflowsPerSecond,
    },
    results: { ceiling, runs },
    tables,
    verdicts: runs.flatMap(verdicts),
    notes: [
      `Ceiling of this run: ${ceiling.workflowsPerSecond} no-activity workflows/s (${context.previous.has('ceiling') ? 'the ceiling scenario' : 'measured in this invocation'}).`,
      ...runs.map((run) => `${run.schedulerLoop} loop: ${run.idleSamples} round samples with the loop view idle; the gap began ${run.gap.from ?? '–'}.`),
    ],
  };
};
