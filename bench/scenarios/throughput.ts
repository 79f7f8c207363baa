/**
 * throughput: budgets high, simulator latency ~0 → card checks (executions) per second the
 * orchestration sustains on this machine, per start mode (CARD_START_MODE child / client),
 * execution shape (one gateway type / three) and run shape (CARD_RUN_SHAPE card / batch), each
 * variant in a fresh stack and alternated when repeated. Every figure is also given as a ratio to
 * the no-activity ceiling measured in this invocation (the ceiling scenario, or a brief
 * measurement here), with history events, workflow tasks and Temporal Cloud actions per check (the
 * card runs' and the schedulers' shares: bench/lib/checkCost.ts), CPU per check, batch ÷ card and
 * ÷ the direct loop, and the 5 M-card example of docs/capacity.md recomputed from these figures.
 */
import { windowSeconds, type Scenario } from '../lib/context.js';
import { measureCardExecutions, startModeCheck, type CardRunResult } from '../lib/cardExecutions.js';
import { directLoop, noopCeiling } from '../lib/capacity.js';
import type { RunShape, Shape, StartMode } from '../lib/options.js';
import { cpuNote } from '../lib/window.js';
import { round } from '../lib/stats.js';
import { atLeast, atMost, notChecked, perSecond, plain, times, type Verdict } from '../lib/verdict.js';
import { EXAMPLE, PRICE_USD_PER_MILLION_ACTIONS, exampleRows, exampleTable } from '../lib/capacityExample.js';
import { THROUGHPUT_CONFIG, THROUGHPUT_INFLIGHT, THROUGHPUT_BATCH_INFLIGHT, THROUGHPUT_ACCOUNTS, typesPerExecution } from './throughputLoad.js';

/** Targets for single-type executions/s on the dev server, per start mode (card run shape). */
const TARGET_PER_SECOND: Record<StartMode, number> = { child: 30, client: 40 };
/**
 * A single-type execution is one workflow task, ≤ 10 events; each further type adds ≤ 1 event, no
 * task (docs/design.md, 'Execution shape').
 */
const SINGLE_EVENTS_MAX = 10;
const SINGLE_TASKS_MAX = 1;
/** Targets for the batch run shape (single type): × the card shape (client starts), × the direct loop, per check. */
const BATCH_OVER_CARD_MIN = 10;
const BATCH_OVER_DIRECT_MIN = 0.2;
const BATCH_ACTIONS_PER_CHECK_MAX = 0.15;
const BATCH_EVENTS_PER_CHECK_MAX = 2;

interface Variant {
  readonly round: number;
  readonly startMode: StartMode;
  readonly shape: Shape;
  readonly runShape: RunShape;
}

type Run = CardRunResult & { readonly round: number };

/** Rounds × shapes × modes × run shapes, run shapes then modes alternating innermost so repeated variants interleave. */
function variants(rounds: number, shapes: readonly Shape[], modes: readonly StartMode[], runShapes: readonly RunShape[]): Variant[] {
  const out: Variant[] = [];
  for (let round = 1; round <= rounds; round += 1)
    for (const shape of shapes) for (const startMode of modes) for (const runShape of runShapes) out.push({ round, startMode, shape, runShape });
  return out;
}

const mean = (values: readonly number[]): number => (values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length);
const label = (run: { startMode: string; shape: string; runShape: string }): string => `${run.startMode}/${run.shape}/${run.runShape}`;

function rateVerdicts(runs: readonly Run[], modes: readonly StartMode[], ceilingPerSecond: number): Verdict[] {
  return modes.map((mode) => {
    const what = `single-type executions/s with ${mode === 'child' ? 'child workflows' : 'client starts'} (card runs)`;
    const target = TARGET_PER_SECOND[mode];
    const mine = runs.filter((run) => run.startMode === mode && run.shape === 'single' && run.runShape === 'card');
    if (mine.length === 0) return notChecked(what, `≥ ${target}/s`, 'no single-type card-shape run of this mode (see --shapes, --run-shapes)');
    const problem = mine.map(startModeCheck).find((message) => message !== undefined);
    if (problem && mode === 'client') return notChecked(what, `≥ ${target}/s`, problem);
    const rate = mean(mine.map((run) => run.executionsPerSecond));
    const each = mine.length > 1 ? `, runs ${mine.map((run) => run.executionsPerSecond).join(' / ')}` : '';
    const ratio =
      ceilingPerSecond > 0 ? `${round(rate / ceilingPerSecond, 2)}× the no-activity ceiling of ${ceilingPerSecond}/s${each}` : `no ceiling figure${each}`;
    return atLeast(what, rate, target, perSecond, problem ? `${ratio}; ${problem}` : ratio);
  });
}

/** The history targets ('Execution shape'), for cardCheck runs (a batch run's history grows with its cards). */
function shapeVerdicts(runs: readonly Run[]): Verdict[] {
  const verdicts: Verdict[] = [];
  for (const mode of new Set(runs.map((run) => run.startMode))) {
    const of = (shape: Shape): Run[] =>
      runs.filter((run) => run.startMode === mode && run.shape === shape && run.runShape === 'card' && run.history.sampled > 0);
    const single = of('single');
    const three = of('three');
    const events = (list: Run[]): number => mean(list.map((run) => run.history.events.mean));
    const tasks = (list: Run[]): number => mean(list.map((run) => run.history.workflowTasks.mean));
    if (single.length > 0) {
      verdicts.push(atMost(`history events per single-type execution (${mode}, card runs, mean)`, events(single), SINGLE_EVENTS_MAX, plain));
      verdicts.push(atMost(`workflow tasks per single-type execution (${mode}, card runs, mean)`, tasks(single), SINGLE_TASKS_MAX, plain));
    }
    if (single.length > 0 && three.length > 0) {
      verdicts.push(
        atMost(
          `history events per three-type execution (${mode}, card runs, mean)`,
          events(three),
          events(single) + 2,
          plain,
          'single-type + 1 per further type',
        ),
      );
      verdicts.push(
        atMost(`workflow tasks per three-type execution (${mode}, card runs, mean)`, tasks(three), tasks(single), plain, 'no task per further type'),
      );
    }
  }
  return verdicts;
}

interface Comparison {
  readonly startMode: StartMode;
  readonly shape: Shape;
  readonly card: Run[];
  readonly batch: Run[];
  readonly cardPerSecond: number;
  readonly batchPerSecond: number;
  readonly batchOverCard: number | null;
  readonly batchOverDirect: number | null;
  readonly cardOverDirect: number | null;
}

function comparisons(runs: readonly Run[], directPerSecond: number | undefined): Comparison[] {
  const out: Comparison[] = [];
  for (const shape of new Set(runs.map((run) => run.shape)))
    for (const startMode of new Set(runs.map((run) => run.startMode))) {
      const of = (runShape: RunShape): Run[] => runs.filter((run) => run.startMode === startMode && run.shape === shape && run.runShape === runShape);
      const card = of('card');
      const batch = of('batch');
      if (card.length === 0 && batch.length === 0) continue;
      const cardPerSecond = round(mean(card.map((run) => run.executionsPerSecond)), 1);
      const batchPerSecond = round(mean(batch.map((run) => run.executionsPerSecond)), 1);
      const ratio = (a: number, b: number | undefined, present: boolean): number | null => (present && b !== undefined && b > 0 ? round(a / b, 3) : null);
      out.push({
        startMode,
        shape,
        card,
        batch,
        cardPerSecond,
        batchPerSecond,
        batchOverCard: ratio(batchPerSecond, cardPerSecond, batch.length > 0 && card.length > 0),
        batchOverDirect: ratio(batchPerSecond, directPerSecond, batch.length > 0),
        cardOverDirect: ratio(cardPerSecond, directPerSecond, card.length > 0),
      });
    }
  return out;
}

/** The batch run shape's targets: batch against card and the direct loop (client, single type), and its cost per check in either mode. */
function batchVerdicts(compared: readonly Comparison[], directPerSecond: number | undefined): Verdict[] {
  const verdicts: Verdict[] = [];
  const client = compared.find((c) => c.startMode === 'client' && c.shape === 'single');
  const what = 'batch ÷ card checks/s (client starts, single type)';
  if (!client || client.batchOverCard === null)
    verdicts.push(notChecked(what, `≥ ${BATCH_OVER_CARD_MIN}×`, 'needs both run shapes with client starts, single type'));
  else verdicts.push(atLeast(what, client.batchOverCard, BATCH_OVER_CARD_MIN, times, `${client.batchPerSecond}/s ÷ ${client.cardPerSecond}/s`));
  const direct = 'batch ÷ direct loop checks/s (client starts, single type)';
  if (!client || client.batchOverDirect === null)
    verdicts.push(notChecked(direct, `≥ ${BATCH_OVER_DIRECT_MIN}`, 'needs a batch run with client starts, single type, and the direct loop'));
  else verdicts.push(atLeast(direct, client.batchOverDirect, BATCH_OVER_DIRECT_MIN, plain, `${client.batchPerSecond}/s ÷ ${directPerSecond}/s`));
  for (const c of compared.filter((x) => x.shape === 'single' && x.batch.length > 0)) {
    const sampled = c.batch.filter((run) => run.checkCost.runsSampled > 0);
    if (sampled.length === 0) {
      verdicts.push(
        notChecked(`actions per check (${c.startMode}, batch runs, single type)`, `≤ ${BATCH_ACTIONS_PER_CHECK_MAX}`, 'no completed batch run sampled'),
      );
      continue;
    }
    const note = (key: 'actions' | 'events'): string =>
      `card runs ${round(mean(sampled.map((run) => run.checkCost.runPerCheck[key])), 3)} + schedulers ` +
      `${round(mean(sampled.map((run) => run.checkCost.schedulerPerCheck[key])), 3)}, ${round(mean(sampled.map((run) => run.checkCost.checksPerRun)), 1)} checks per run`;
    verdicts.push(
      atMost(
        `actions per check (${c.startMode}, batch runs, single type)`,
        mean(sampled.map((run) => run.checkCost.perCheck.actions)),
        BATCH_ACTIONS_PER_CHECK_MAX,
        plain,
        note('actions'),
      ),
      atMost(
        `history events per check (${c.startMode}, batch runs, single type)`,
        mean(sampled.map((run) => run.checkCost.perCheck.events)),
        BATCH_EVENTS_PER_CHECK_MAX,
        plain,
        note('events'),
      ),
    );
  }
  return verdicts;
}

const byKind = (kinds: Record<string, number>): string =>
  Object.entries(kinds)
    .filter(([, n]) => n > 0)
    .map(([kind, n]) => `${kind} ${n}`)
    .join(', ');

export const throughput: Scenario = async (context) => {
  const seconds = windowSeconds(context, { warmupSec: 20, durationSec: 45 });
  const noop = await noopCeiling(context);
  const runShapes = context.options.runShapes;
  const plan = variants(context.options.rounds, context.options.shapes, context.options.startModes, runShapes);
  const runs: Run[] = [];
  for (const [index, variant] of plan.entries()) {
    const name = `${label(variant)} (${index + 1}/${plan.length})`;
    const run = await measureCardExecutions(context, { startMode: variant.startMode, shape: variant.shape, runShape: variant.runShape, ...seconds }, name);
    context.measured.cardRuns.push({ ...run, source: `throughput round ${variant.round}` });
    runs.push({ ...run, round: variant.round });
    context.log(
      `${name}: ${run.executionsPerSecond} checks/s, ${run.checkCost.checksPerRun} checks per run; per check ${run.checkCost.perCheck.events} events, ` +
        `${run.checkCost.perCheck.workflowTasks} workflow tasks, ${run.checkCost.perCheck.actions} actions`,
    );
  }
  // The direct loop is the reference the batch shape is held against: measured here when direct has
  // not run yet.
  const direct = runShapes.includes('batch') ? await directLoop(context) : context.measured.direct;
  const directPerSecond = direct?.executionsPerSecond;
  const compared = comparisons(runs, directPerSecond);
  const batchSize = Number(runs.find((run) => run.runShape === 'batch')?.settings.CARD_BATCH_SIZE ?? context.config.CARD_BATCH_SIZE);
  const example = exampleRows(runs, batchSize);
  const ratio = (run: CardRunResult): number | string => (noop.workflowsPerSecond > 0 ? round(run.executionsPerSecond / noop.workflowsPerSecond, 3) : '–');
  const c = (run: CardRunResult): CardRunResult['cost']['cpuMsPerExecution'] => run.cost.cpuMsPerExecution;
  const warnings = runs.map((run) => [run, startModeCheck(run)] as const).filter(([, message]) => message !== undefined);
  return {
    title: 'card checks per second by start mode, shape and run shape, against the no-activity ceiling and the direct loop',
    explain: [
      `${THROUGHPUT_CONFIG.accounts} accounts × ${THROUGHPUT_CONFIG.cardsPerAccount} cards due every ` +
        `${THROUGHPUT_CONFIG.intervalSec} s, budget ${THROUGHPUT_CONFIG.qps} QPS per group, gateway latency p50 ` +
        `${THROUGHPUT_CONFIG.latencyMs.p50} ms: the backlog never drains. ` +
        `Shape single: card_status only; three: card_status + carddata + realname (one group each). Run shape card: one ` +
        `cardCheck run per check; batch: cardBatch runs of up to CARD_BATCH_SIZE (${batchSize}) checks, each claim round's ` +
        `cards of an account cut into batches. Each variant in a fresh stack with CARD_START_MODE and CARD_RUN_SHAPE set for its workers.`,
      `Ratio = checks/s ÷ no-activity workflows/s (${noop.workflowsPerSecond}/s at ` +
        `${noop.temporalCpuMsPerWorkflow} ms Temporal CPU each, measured ${noop.date.slice(11, 19)} in this ` +
        `invocation)` +
        (direct ? `; ÷ direct = checks/s ÷ the direct loop's ${direct.executionsPerSecond}/s (measured ${direct.date.slice(11, 19)}).` : '.'),
      'Per run: fetchHistory of up to 20 completed runs of the window (card runs: successful ones that ran all the ' +
        'shape\'s types; "child" = sampled runs that have a parent workflow). Per check: the sampled runs\' events, ' +
        "workflow tasks and actions ÷ the checks they recorded, plus the schedulers' share — every event of every " +
        'scheduler run in the window (continue-as-new included) ÷ checks started in the window. Actions by Temporal ' +
        'Cloud\'s published rules (docs/capacity.md, "Actions"; bench/lib/actions.ts).',
      "Redis commands and SQL statements: sent by this process (the four workers run in it). CPU ms per check: process CPU in the window ÷ checks; workers = this process (4 workers + the bench's sampling), sim = the simulator's own process.",
    ],
    config: {
      ...seconds,
      rounds: context.options.rounds,
      startModes: context.options.startModes.join(','),
      shapes: context.options.shapes.join(','),
      runShapes: runShapes.join(','),
      ...THROUGHPUT_CONFIG,
      ...runs[0]?.settings,
      CARD_START_MODE: 'per variant',
      CARD_RUN_SHAPE: 'per variant',
      CARD_BATCH_SIZE: batchSize,
    },
    results: {
      noopCeiling: noop,
      directLoop: direct ?? null,
      variants: runs.map((run) => ({
        ...run,
        ratioToNoActivity: ratio(run),
        ratioToDirect: directPerSecond ? round(run.executionsPerSecond / directPerSecond, 3) : null,
      })),
      comparisons: compared.map((x) => ({
        startMode: x.startMode,
        shape: x.shape,
        cardPerSecond: x.cardPerSecond,
        batchPerSecond: x.batchPerSecond,
        batchOverCard: x.batchOverCard,
        batchOverDirect: x.batchOverDirect,
        cardOverDirect: x.cardOverDirect,
      })),
      capacityExample: { ...EXAMPLE, batchSize, pricesUsdPerMillionActions: PRICE_USD_PER_MILLION_ACTIONS, rows: example },
    },
    tables: [
      {
        headers: [
          'round',
          'start',
          'types',
          'run shape',
          'checks/s',
          'ratio to no-activity',
          'gateway calls/s',
          'checks / run',
          'events / run',
          'workflow tasks / run',
          'child runs',
          'events / check',
          'workflow tasks / check',
          'actions / check',
          'Temporal CPU ms / check',
          'workers CPU ms / check',
        ],
        numeric: [true, false, true, false, true, true, true, true, true, true, false, true, true, true, true, true],
        rows: runs.map((run) => [
          run.round,
          run.startMode,
          typesPerExecution(run.shape),
          run.runShape,
          run.executionsPerSecond,
          ratio(run),
          run.gatewayCallsPerSecond,
          run.checkCost.checksPerRun,
          run.history.events.mean,
          run.history.workflowTasks.mean,
          `${run.history.withParent}/${run.history.sampled}`,
          run.checkCost.perCheck.events,
          run.checkCost.perCheck.workflowTasks,
          run.checkCost.perCheck.actions,
          c(run).temporal,
          c(run).bench,
        ]),
      },
      {
        headers: [
          'round',
          'start',
          'types',
          'run shape',
          'actions / check: card runs',
          'actions / check: schedulers',
          'actions / check by kind',
          'scheduler tick actions / account·s',
          'scheduler runs',
          'Redis cmds / check',
          'SQL stmts / check',
          'workers+sim CPU ms / check',
          'sim CPU ms / check',
          'PostgreSQL CPU ms / check',
          'Redis CPU ms / check',
        ],
        numeric: [true, false, true, false, true, true, false, true, true, true, true, true, true, true, true],
        rows: runs.map((run) => [
          run.round,
          run.startMode,
          typesPerExecution(run.shape),
          run.runShape,
          run.checkCost.runPerCheck.actions,
          run.checkCost.schedulerPerCheck.actions,
          byKind(run.checkCost.perCheck.actionsByKind),
          run.checkCost.schedulerTickActionsPerAccountSecond,
          run.checkCost.schedulerRuns,
          run.cost.redisCommandsPerExecution,
          run.cost.sqlStatementsPerExecution,
          round(c(run).bench + c(run).simulator, 2),
          c(run).simulator,
          c(run).postgres,
          c(run).redis,
        ]),
      },
      {
        // batch ÷ card and ÷ the direct loop: the figures the batch run shape's targets read.
        headers: [
          'start',
          'types',
          'card checks/s',
          'batch checks/s',
          'batch ÷ card',
          'direct loop checks/s',
          'batch ÷ direct',
          'card ÷ direct',
          'actions / check card → batch',
          'events / check card → batch',
          'Temporal CPU ms / check card → batch',
          'workers CPU ms / check card → batch',
        ],
        numeric: [false, true, true, true, true, true, true, true, false, false, false, false],
        rows: compared.map((x) => {
          const pair = (pick: (run: Run) => number): string =>
            `${x.card.length > 0 ? round(mean(x.card.map(pick)), 3) : '–'} → ${x.batch.length > 0 ? round(mean(x.batch.map(pick)), 3) : '–'}`;
          return [
            x.startMode,
            typesPerExecution(x.shape),
            x.card.length > 0 ? x.cardPerSecond : '–',
            x.batch.length > 0 ? x.batchPerSecond : '–',
            x.batchOverCard ?? '–',
            directPerSecond ?? '–',
            x.batchOverDirect ?? '–',
            x.cardOverDirect ?? '–',
            pair((run) => run.checkCost.perCheck.actions),
            pair((run) => run.checkCost.perCheck.events),
            pair((run) => c(run).temporal),
            pair((run) => c(run).bench),
          ];
        }),
      },
      {
        headers: ['round', 'start', 'types', 'run shape', 'account', 'limited by', 'in-flight limit', 'start lag ms', 'engine capacity /s', 'expired leases'],
        numeric: [true, false, true, false, false, false, true, true, true, true],
        rows: runs.flatMap((run) =>
          run.schedulers.map((s) => [
            run.round,
            run.startMode,
            typesPerExecution(run.shape),
            run.runShape,
            s.carrierId,
            s.limitedBy,
            s.inflightLimit,
            s.startLagMs,
            s.capacityPerSec ?? '-',
            s.expiredLeases,
          ]),
        ),
      },
      ...(example.length > 0 ? [exampleTable(example)] : []),
    ],
    verdicts: [
      ...rateVerdicts(runs, context.options.startModes, noop.workflowsPerSecond),
      ...shapeVerdicts(runs),
      ...(runShapes.includes('batch') ? batchVerdicts(compared, directPerSecond) : []),
    ],
    notes: [
      ...warnings.map(([run, message]) => `Round ${run.round} ${label(run)}: ${message}.`),
      ...runs.map(
        (run) =>
          `Round ${run.round} ${label(run)}: executions by types run ${JSON.stringify(run.typesPerExecution)}; per run events ` +
          `${run.history.events.min}–${run.history.events.max}, workflow tasks ${run.history.workflowTasks.min}–${run.history.workflowTasks.max} ` +
          `(${run.history.sampled} runs); ${run.checkCost.runsSampled} runs read for the cost per check (${run.checkCost.checks} checks), ` +
          `workflow task failures ${run.checkCost.perRun.workflowTaskFailures} and timeouts ${run.checkCost.perRun.workflowTaskTimeouts} per run. ${cpuNote(run.cpuShares)}`,
      ),
      ...runs.slice(0, 1).map(
        (run) =>
          `Redis per execution (this process, ${label(run)}): ${Object.entries(run.cost.redisCommandsByName)
            .map(([name, n]) => `${name} ${n}`)
            .join(', ')}; server-wide ${run.cost.serverWideRedisCallsPerExecution} calls/execution including other users.`,
      ),
      `In-flight limit per account: ${THROUGHPUT_INFLIGHT} in the card run shape (the production default; higher, its runs ` +
        `flood the engine), ${THROUGHPUT_BATCH_INFLIGHT} in the batch shape (${THROUGHPUT_BATCH_INFLIGHT / batchSize} runs of ` +
        `${batchSize}; at 200 the batch shape met the claim ceiling itself). Claim ceiling of this workload: ${THROUGHPUT_ACCOUNTS} ` +
        `accounts × the limit per 1 s tick ≈ ${THROUGHPUT_ACCOUNTS * THROUGHPUT_INFLIGHT} (card) and ` +
        `${THROUGHPUT_ACCOUNTS * THROUGHPUT_BATCH_INFLIGHT} (batch) checks/s while each run completes within its tick; a rate near ` +
        'it with the schedulers "limited by inflight" is the in-flight limit, not the engine.',
      ...(example.length > 0
        ? [
            `5 M-card example (docs/capacity.md (f)): ${EXAMPLE.checksPerSecond} checks/s at the production intervals over ` +
              `${EXAMPLE.accounts.join(' or ')} accounts, ${EXAMPLE.tickSec} s ticks, CARD_BATCH_SIZE ${batchSize}; derived ` +
              '(bench/lib/capacityExample.ts): runs/s = E for card, min(E, accounts × ⌈cards per account round ÷ batch size⌉) ' +
              'for batch; actions/s = runs/s × (actions per run measured here + 1 child-start intent in child mode) + accounts × ' +
              "the scheduler's tick actions per account·s measured here; cores = CPU per run and per card solved from the two " +
              `shapes' CPU per check, at this machine's speed. USD at ${PRICE_USD_PER_MILLION_ACTIONS.join(' and ')} per million actions.`,
          ]
        : runShapes.includes('batch')
          ? ['5 M-card example: needs single-type runs of both run shapes in one start mode.']
          : []),
    ],
  };
};
