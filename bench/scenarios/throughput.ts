/**
 * throughput: budgets high, simulator latency ~0 → card executions per second the orchestration
 * sustains on this machine, per start mode (CARD_START_MODE child / client) and execution shape
 * (one gateway type / three), each variant in a fresh stack and alternated when repeated. Every
 * figure is also given as a ratio to the no-activity ceiling measured in this invocation (the
 * ceiling scenario, or a brief measurement here), with history events and workflow tasks per
 * execution and the cost per execution.
 */
import { windowSeconds, type Scenario } from '../lib/context.js';
import { measureCardExecutions, startModeCheck, type CardRunResult } from '../lib/cardExecutions.js';
import { noopCeiling } from '../lib/capacity.js';
import type { Shape, StartMode } from '../lib/options.js';
import { cpuNote } from '../lib/window.js';
import { round } from '../lib/stats.js';
import { atLeast, atMost, notChecked, perSecond, plain, type Verdict } from '../lib/verdict.js';
import { THROUGHPUT_CONFIG, typesPerExecution } from './throughputLoad.js';

/** Issue 11 targets for single-type executions/s on the dev server, per start mode. */
const TARGET_PER_SECOND: Record<StartMode, number> = { child: 30, client: 40 };
/** Issue 11 item 1: a single-type execution is one workflow task, ≤ 10 events; each further type adds ≤ 1 event, no task. */
const SINGLE_EVENTS_MAX = 10;
const SINGLE_TASKS_MAX = 1;

interface Variant {
  readonly round: number;
  readonly startMode: StartMode;
  readonly shape: Shape;
}

/** Rounds × shapes × modes, modes alternating innermost so repeated variants interleave. */
function variants(rounds: number, shapes: readonly Shape[], modes: readonly StartMode[]): Variant[] {
  const out: Variant[] = [];
  for (let round = 1; round <= rounds; round += 1) for (const shape of shapes) for (const startMode of modes) out.push({ round, startMode, shape });
  return out;
}

const mean = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0) / values.length;

function rateVerdicts(runs: readonly (CardRunResult & { round: number })[], modes: readonly StartMode[], ceilingPerSecond: number): Verdict[] {
  return modes.map((mode) => {
    const what = `single-type executions/s with ${mode === 'child' ? 'child workflows' : 'client starts'}`;
    const target = TARGET_PER_SECOND[mode];
    const mine = runs.filter((run) => run.startMode === mode && run.shape === 'single');
    if (mine.length === 0) return notChecked(what, `≥ ${target}/s`, 'no single-type run of this mode (see --shapes)');
    const problem = mine.map(startModeCheck).find((message) => message !== undefined);
    if (problem && mode === 'client') return notChecked(what, `≥ ${target}/s`, problem);
    const rate = mean(mine.map((run) => run.executionsPerSecond));
    const each = mine.length > 1 ? `, runs ${mine.map((run) => run.executionsPerSecond).join(' / ')}` : '';
    const ratio =
      ceilingPerSecond > 0 ? `${round(rate / ceilingPerSecond, 2)}× the no-activity ceiling of ${ceilingPerSecond}/s${each}` : `no ceiling figure${each}`;
    return atLeast(what, rate, target, perSecond, problem ? `${ratio}; ${problem}` : ratio);
  });
}

function shapeVerdicts(runs: readonly CardRunResult[]): Verdict[] {
  const verdicts: Verdict[] = [];
  for (const mode of new Set(runs.map((run) => run.startMode))) {
    const of = (shape: Shape): CardRunResult[] => runs.filter((run) => run.startMode === mode && run.shape === shape && run.history.sampled > 0);
    const single = of('single');
    const three = of('three');
    const events = (list: CardRunResult[]): number => mean(list.map((run) => run.history.events.mean));
    const tasks = (list: CardRunResult[]): number => mean(list.map((run) => run.history.workflowTasks.mean));
    if (single.length > 0) {
      verdicts.push(atMost(`history events per single-type execution (${mode}, mean)`, events(single), SINGLE_EVENTS_MAX, plain));
      verdicts.push(atMost(`workflow tasks per single-type execution (${mode}, mean)`, tasks(single), SINGLE_TASKS_MAX, plain));
    }
    if (single.length > 0 && three.length > 0) {
      verdicts.push(
        atMost(`history events per three-type execution (${mode}, mean)`, events(three), events(single) + 2, plain, 'single-type + 1 per further type'),
      );
      verdicts.push(atMost(`workflow tasks per three-type execution (${mode}, mean)`, tasks(three), tasks(single), plain, 'no task per further type'));
    }
  }
  return verdicts;
}

export const throughput: Scenario = async (context) => {
  const seconds = windowSeconds(context, { warmupSec: 20, durationSec: 45 });
  const noop = await noopCeiling(context);
  const plan = variants(context.options.rounds, context.options.shapes, context.options.startModes);
  const runs: (CardRunResult & { round: number })[] = [];
  for (const [index, variant] of plan.entries()) {
    const label = `${variant.startMode}/${variant.shape} (${index + 1}/${plan.length})`;
    const run = await measureCardExecutions(context, { startMode: variant.startMode, shape: variant.shape, ...seconds }, label);
    context.measured.cardRuns.push({ ...run, source: `throughput round ${variant.round}` });
    runs.push({ ...run, round: variant.round });
    context.log(
      `${label}: ${run.executionsPerSecond} executions/s, ${run.history.events.mean} events, ${run.history.workflowTasks.mean} workflow tasks per execution`,
    );
  }
  const ratio = (run: CardRunResult): number | string => (noop.workflowsPerSecond > 0 ? round(run.executionsPerSecond / noop.workflowsPerSecond, 3) : '–');
  const c = (run: CardRunResult): CardRunResult['cost']['cpuMsPerExecution'] => run.cost.cpuMsPerExecution;
  const warnings = runs.map((run) => [run, startModeCheck(run)] as const).filter(([, message]) => message !== undefined);
  return {
    title: 'card executions per second by start mode and shape, against the no-activity ceiling',
    explain: [
      `${THROUGHPUT_CONFIG.accounts} accounts × ${THROUGHPUT_CONFIG.cardsPerAccount} cards due every ` +
        `${THROUGHPUT_CONFIG.intervalSec} s, budget ${THROUGHPUT_CONFIG.qps} QPS per group, gateway latency p50 ` +
        `${THROUGHPUT_CONFIG.latencyMs.p50} ms: the backlog never drains. ` +
        `Shape single: card_status only; three: card_status + carddata + realname (one group each). Each variant in a ` +
        `fresh stack with CARD_START_MODE set for its workers.`,
      `Ratio = executions/s ÷ no-activity workflows/s (${noop.workflowsPerSecond}/s at ` +
        `${noop.temporalCpuMsPerWorkflow} ms Temporal CPU each, measured ${noop.date.slice(11, 19)} in this ` +
        `invocation).`,
      'Events and workflow tasks (WorkflowTaskCompleted) per execution: fetchHistory of up to 20 completed runs of ' +
        'the window that ran all the shape\'s types; "child" = sampled runs that have a parent workflow. ' +
        'Redis commands and SQL statements: sent by this process (the four workers run in it). CPU ms per execution: process CPU in the window ÷ executions.',
    ],
    config: {
      ...seconds,
      rounds: context.options.rounds,
      startModes: context.options.startModes.join(','),
      shapes: context.options.shapes.join(','),
      ...THROUGHPUT_CONFIG,
      ...runs[0]?.settings,
      CARD_START_MODE: 'per variant',
    },
    results: { noopCeiling: noop, variants: runs.map((run) => ({ ...run, ratioToNoActivity: ratio(run) })) },
    tables: [
      {
        headers: [
          'round',
          'start',
          'types',
          'executions/s',
          'ratio to no-activity',
          'gateway calls/s',
          'events / exec',
          'workflow tasks / exec',
          'child runs',
          'Redis cmds / exec',
          'SQL stmts / exec',
          'Temporal CPU ms / exec',
          'workers+sim CPU ms / exec',
          'PostgreSQL CPU ms / exec',
          'Redis CPU ms / exec',
        ],
        numeric: [true, false, true, true, true, true, true, true, false, true, true, true, true, true, true],
        rows: runs.map((run) => [
          run.round,
          run.startMode,
          typesPerExecution(run.shape),
          run.executionsPerSecond,
          ratio(run),
          run.gatewayCallsPerSecond,
          run.history.events.mean,
          run.history.workflowTasks.mean,
          `${run.history.withParent}/${run.history.sampled}`,
          run.cost.redisCommandsPerExecution,
          run.cost.sqlStatementsPerExecution,
          c(run).temporal,
          c(run).bench,
          c(run).postgres,
          c(run).redis,
        ]),
      },
      {
        // The adaptive in-flight limit at work: an engine-bound run should say `orchestration`, with leases intact.
        headers: ['round', 'start', 'types', 'account', 'limited by', 'in-flight limit', 'start lag ms', 'engine capacity /s', 'expired leases'],
        numeric: [true, false, true, false, false, true, true, true, true],
        rows: runs.flatMap((run) =>
          run.schedulers.map((s) => [
            run.round,
            run.startMode,
            typesPerExecution(run.shape),
            s.carrierId,
            s.limitedBy,
            s.inflightLimit,
            s.startLagMs,
            s.capacityPerSec ?? '-',
            s.expiredLeases,
          ]),
        ),
      },
    ],
    verdicts: [...rateVerdicts(runs, context.options.startModes, noop.workflowsPerSecond), ...shapeVerdicts(runs)],
    notes: [
      ...warnings.map(([run, message]) => `Round ${run.round} ${run.startMode}/${run.shape}: ${message}.`),
      ...runs.map(
        (run) =>
          `Round ${run.round} ${run.startMode}/${run.shape}: executions by types run ` +
          `${JSON.stringify(run.typesPerExecution)}; events ${run.history.events.min}–${run.history.events.max}, ` +
          `workflow tasks ${run.history.workflowTasks.min}–${run.history.workflowTasks.max} (${run.history.sampled} ` +
          `runs). ${cpuNote(run.cpuShares)}`,
      ),
      ...runs.slice(0, 1).map(
        (run) =>
          `Redis per execution (this process, ${run.startMode}/${run.shape}): ${Object.entries(run.cost.redisCommandsByName)
            .map(([name, n]) => `${name} ${n}`)
            .join(', ')}; server-wide ${run.cost.serverWideRedisCallsPerExecution} calls/execution including other users.`,
      ),
    ],
  };
};
