/**
 * The engine's figures that other scenarios build on, from this invocation only: the no-activity
 * ceiling and the direct loop (ratios), and the orchestration capacity — single-type card
 * executions/s in a start mode and run shape, by default those the stack runs with (load sizing).
 * When ceiling/throughput/direct did not run, a brief measurement is taken once and shared with
 * the later scenarios.
 */
import { briefSeconds, type ScenarioContext } from './context.js';
import { measureCardExecutions } from './cardExecutions.js';
import { measureNoopCeiling, type NoopCeiling } from './noopCeiling.js';
import type { RunShape, StartMode } from './options.js';
import { measureDirectLoop, type DirectLoop } from '../scenarios/direct.js';
import { round } from './stats.js';

export interface Capacity {
  /**
   * Card executions per second the orchestration sustained: the lowest of the measurements used.
   * They can differ by a third (the ceiling scenario's card path against throughput's whole
   * orchestration); a load sized from their mean asked more than the slower one ran.
   */
  readonly perSecond: number;
  readonly startMode: string;
  readonly runShape: RunShape;
  /** Which measurements of this invocation it comes from. */
  readonly source: string;
}

const BRIEF_CARDS = { warmupSec: 15, durationSec: 20 };
const BRIEF_NOOP = { warmupSec: 3, durationSec: 10 };
const BRIEF_DIRECT = { warmupSec: 5, durationSec: 20 };

/** Capacity of one start mode and run shape (default: the configured ones, as a stack without options runs). */
export async function orchestrationCapacity(context: ScenarioContext, want: { startMode?: StartMode; runShape?: RunShape } = {}): Promise<Capacity> {
  const startMode = want.startMode ?? context.config.CARD_START_MODE;
  const runShape = want.runShape ?? context.config.CARD_RUN_SHAPE;
  const matching = (): typeof context.measured.cardRuns =>
    context.measured.cardRuns.filter((run) => run.shape === 'single' && run.startMode === startMode && run.runShape === runShape);
  if (matching().length === 0) {
    context.log(`no capacity measured yet in this invocation: brief card-execution measurement (${startMode} starts, ${runShape} runs)`);
    const run = await measureCardExecutions(context, { startMode, shape: 'single', runShape, ...briefSeconds(context, BRIEF_CARDS) }, 'capacity');
    context.measured.cardRuns.push({ ...run, source: 'brief capacity measurement' });
  }
  const runs = matching();
  const perSecond = round(Math.min(...runs.map((run) => run.executionsPerSecond)), 1);
  const listed = runs.map((run) => `${run.source} ${run.executionsPerSecond}/s at ${run.date.slice(11, 19)}`).join(', ');
  return { perSecond, startMode, runShape, source: runs.length > 1 ? `lowest of ${listed}` : listed };
}

/** The direct loop's executions/s of this invocation, or a brief measurement (20 s) shared with later scenarios. */
export async function directLoop(context: ScenarioContext): Promise<DirectLoop> {
  if (!context.measured.direct) {
    context.log('no direct loop measured yet in this invocation: brief direct-loop measurement');
    context.measured.direct = await measureDirectLoop(context, briefSeconds(context, BRIEF_DIRECT));
  }
  return context.measured.direct;
}

export async function noopCeiling(context: ScenarioContext): Promise<NoopCeiling> {
  if (!context.measured.noop) {
    context.log('no ceiling measured yet in this invocation: brief no-activity workflow measurement');
    context.measured.noop = await measureNoopCeiling(context.config, briefSeconds(context, BRIEF_NOOP), context.log);
  }
  return context.measured.noop;
}

/** A note comparing a scenario's execution rate with the capacity its load was sized from. */
export function capacityNote(capacity: Capacity, executionsPerSecond: number, neededPerSecond: number): string {
  return (
    `The orchestration executed ${round(executionsPerSecond, 1)} cards/s in the window; the load needs ${round(neededPerSecond, 1)}/s. ` +
    `Capacity used for sizing: ${capacity.perSecond}/s (${capacity.startMode} starts, ${capacity.runShape} runs; ${capacity.source}).`
  );
}
