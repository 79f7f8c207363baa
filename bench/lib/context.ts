/** What every scenario gets from the runner. */
import type { Config } from '../../src/config/index.js';
import type { BenchOptions, ScenarioName } from './options.js';
import type { ScenarioOutcome, ScenarioReport } from './report.js';

export interface ScenarioContext {
  readonly config: Config;
  readonly options: BenchOptions;
  readonly log: (line: string) => void;
  /** Reports of scenarios already run in this invocation (direct compares itself to throughput). */
  readonly previous: ReadonlyMap<ScenarioName, ScenarioReport>;
}

export type Scenario = (context: ScenarioContext) => Promise<ScenarioOutcome>;

/** Warm-up and window lengths: the flag/env value when given, else the scenario's default. */
export function windowSeconds(context: ScenarioContext, defaults: { warmupSec: number; durationSec: number }): { warmupSec: number; durationSec: number } {
  return { warmupSec: context.options.warmupSec ?? defaults.warmupSec, durationSec: context.options.durationSec ?? defaults.durationSec };
}
