/** What every scenario gets from the runner. */
import type { Config } from '../../src/config/index.js';
import type { BenchOptions, ScenarioName } from './options.js';
import type { ScenarioOutcome, ScenarioReport } from './report.js';
import type { NoopCeiling } from './noopCeiling.js';
import type { CardRunResult } from './cardExecutions.js';
import type { DirectLoop } from '../scenarios/direct.js';

/**
 * Figures measured earlier in this invocation, typed, for scenarios that build on them (ratios to
 * the ceiling, load sized from capacity). Never read from old result files: a figure from another
 * day or another load would size today's run wrongly.
 */
export interface Measured {
  noop?: NoopCeiling;
  /** The direct loop (no Temporal): the direct scenario, or throughput's brief measurement. */
  direct?: DirectLoop;
  /** Every card-execution measurement of this invocation (ceiling's card shape, throughput's variants, brief capacity checks). */
  readonly cardRuns: (CardRunResult & { readonly source: string })[];
}

export interface ScenarioContext {
  readonly config: Config;
  readonly options: BenchOptions;
  readonly log: (line: string) => void;
  /** Reports of scenarios already run in this invocation (direct compares itself to throughput). */
  readonly previous: ReadonlyMap<ScenarioName, ScenarioReport>;
  readonly measured: Measured;
}

export type Scenario = (context: ScenarioContext) => Promise<ScenarioOutcome>;

/** Warm-up and window lengths: the flag/env value when given, else the scenario's default. */
export function windowSeconds(context: ScenarioContext, defaults: { warmupSec: number; durationSec: number }): { warmupSec: number; durationSec: number } {
  return { warmupSec: context.options.warmupSec ?? defaults.warmupSec, durationSec: context.options.durationSec ?? defaults.durationSec };
}

/** A measurement inside another scenario: never longer than its default, shorter when the run asks for it. */
export function briefSeconds(context: ScenarioContext, defaults: { warmupSec: number; durationSec: number }): { warmupSec: number; durationSec: number } {
  return {
    warmupSec: Math.min(context.options.warmupSec ?? defaults.warmupSec, defaults.warmupSec),
    durationSec: Math.min(context.options.durationSec ?? defaults.durationSec, defaults.durationSec),
  };
}
