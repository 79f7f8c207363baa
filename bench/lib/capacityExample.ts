/**
 * The worked example of docs/capacity.md (f) — 5 M cards at the production intervals, 471 checks/s —
 * recomputed in both run shapes from one throughput run's figures, ready to paste into that document:
 * actions/day, the cost per day at Temporal Cloud's list prices, and cores.
 *
 * What a batch carries is what one claim round of one account holds: at 471 checks/s over A
 * accounts with 1 s ticks, λ = 471 / A cards per account and round. With A = 300 that is ~1.6
 * cards, so a batch run carries ~1.6 cards, not CARD_BATCH_SIZE; the rows give both a many-account
 * and a few-account fleet. The model (derived, not measured):
 *
 *   runs/s        card: E;  batch: min(E, A × ⌈λ / B⌉ / tick)
 *   actions/s     runs/s × (actions per run + 1 child-start intent in child mode) + A × tick actions per account-second
 *   CPU ms/s      card: E × c₁;  batch: runs/s × f + E × v, with the per-run part f and the per-card part v
 *                 solved from the two measurements (c₁ per check at 1 card per run, c_b per check at n per run):
 *                 v = (n × c_b − c₁) / (n − 1), f = c₁ − v
 *
 * Actions per batch run are taken as measured at full batches (more cards can take one more
 * workflow task): for small batches an upper bound. The scheduler's continue-as-new (1 action per
 * ~2 000 events) is left out: below 1 % here.
 */
import type { CardRunResult } from './cardExecutions.js';
import type { StartMode } from './options.js';
import type { Table } from './report.js';
import { round } from './stats.js';

export const EXAMPLE = {
  cards: 5_000_000,
  /** docs/capacity.md (f), production set of intervals: executions per second (upper bound). */
  checksPerSecond: 471,
  /** 300 accounts of 16 667 cards (the example), and a fleet of 10 large accounts. */
  accounts: [300, 10],
  tickSec: 1,
} as const;
/** Temporal Cloud list prices per million actions, low and high end (docs/capacity.md). */
export const PRICE_USD_PER_MILLION_ACTIONS = [25, 50] as const;

export interface ExampleRow {
  readonly startMode: StartMode;
  readonly runShape: string;
  readonly accounts: number;
  readonly cardsPerAccountRound: number;
  readonly cardsPerRun: number;
  readonly runsPerSecond: number;
  readonly actionsPerCheck: number;
  readonly actionsPerDayMillions: number;
  readonly usdPerDay: readonly number[];
  readonly temporalCores: number;
  readonly workerCores: number;
}

const perRunActions = (run: CardRunResult): number => run.checkCost.perRun.actions;

/** Per-run and per-card CPU from a card-shape and a batch-shape measurement (ms). */
function splitCpu(cardPerCheck: number, batchPerCheck: number, checksPerRun: number): { perRun: number; perCard: number } {
  if (checksPerRun <= 1) return { perRun: 0, perCard: batchPerCheck };
  const perCard = Math.max(0, (checksPerRun * batchPerCheck - cardPerCheck) / (checksPerRun - 1));
  return { perRun: Math.max(0, cardPerCheck - perCard), perCard };
}

/**
 * Rows for every start mode that has a single-type measurement in both run shapes (means over
 * rounds). `batchSize` is CARD_BATCH_SIZE of the run.
 */
export function exampleRows(runs: readonly CardRunResult[], batchSize: number): ExampleRow[] {
  const rows: ExampleRow[] = [];
  const E = EXAMPLE.checksPerSecond;
  const mean = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);
  for (const startMode of ['child', 'client'] as const) {
    const of = (runShape: string): CardRunResult[] =>
      runs.filter((run) => run.startMode === startMode && run.shape === 'single' && run.runShape === runShape && run.checkCost.runsSampled > 0);
    const card = of('card');
    const batch = of('batch');
    if (card.length === 0 || batch.length === 0) continue;
    const intents = startMode === 'child' ? 1 : 0;
    const tick = mean([...card, ...batch].map((run) => run.checkCost.schedulerTickActionsPerAccountSecond));
    const cpu = (list: CardRunResult[], part: 'temporal' | 'bench'): number => mean(list.map((run) => run.cost.cpuMsPerExecution[part]));
    const n = mean(batch.map((run) => run.checkCost.checksPerRun));
    const temporal = splitCpu(cpu(card, 'temporal'), cpu(batch, 'temporal'), n);
    const worker = splitCpu(cpu(card, 'bench'), cpu(batch, 'bench'), n);
    for (const accounts of EXAMPLE.accounts) {
      const lambda = (E / accounts) * EXAMPLE.tickSec;
      for (const runShape of ['card', 'batch'] as const) {
        const runsPerSecond = runShape === 'card' ? E : Math.min(E, (accounts * Math.ceil(lambda / batchSize)) / EXAMPLE.tickSec);
        const actionsPerRun = mean((runShape === 'card' ? card : batch).map(perRunActions)) + intents;
        const actionsPerSecond = runsPerSecond * actionsPerRun + accounts * tick;
        const actionsPerDay = actionsPerSecond * 86_400;
        const cores = (split: { perRun: number; perCard: number }, cardMs: number): number =>
          round((runShape === 'card' ? E * cardMs : runsPerSecond * split.perRun + E * split.perCard) / 1000, 1);
        rows.push({
          startMode,
          runShape,
          accounts,
          cardsPerAccountRound: round(lambda, 1),
          cardsPerRun: round(E / runsPerSecond, 1),
          runsPerSecond: round(runsPerSecond),
          actionsPerCheck: round(actionsPerSecond / E, 3),
          actionsPerDayMillions: round(actionsPerDay / 1e6, 1),
          usdPerDay: PRICE_USD_PER_MILLION_ACTIONS.map((price) => Math.round((actionsPerDay / 1e6) * price)),
          temporalCores: cores(temporal, cpu(card, 'temporal')),
          workerCores: cores(worker, cpu(card, 'bench')),
        });
      }
    }
  }
  return rows;
}

export function exampleTable(rows: readonly ExampleRow[]): Table {
  return {
    headers: [
      'start',
      'run shape',
      'accounts',
      'cards per account round',
      'cards per run',
      'runs/s',
      'actions / check',
      'actions/day (M)',
      `USD/day at ${PRICE_USD_PER_MILLION_ACTIONS.join('–')} per M`,
      'Temporal cores',
      'worker cores',
    ],
    numeric: [false, false, true, true, true, true, true, true, true, true, true],
    rows: rows.map((row) => [
      row.startMode,
      row.runShape,
      row.accounts,
      row.cardsPerAccountRound,
      row.cardsPerRun,
      row.runsPerSecond,
      row.actionsPerCheck,
      row.actionsPerDayMillions,
      row.usdPerDay.join('–'),
      row.temporalCores,
      row.workerCores,
    ]),
  };
}
