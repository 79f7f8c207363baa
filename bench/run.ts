/**
 * `npm run bench [-- --scenario NAME] [--help]`: starts the services it needs (as
 * `npm run services:up` would), runs the chosen scenarios one after the other, writes
 * bench/results/<scenario>.json + .md for each and prints the Markdown summaries at the end.
 * Figures are measurements on a shared machine, not assertions: nothing here fails on a miss,
 * the summary says so instead.
 */
import { loadConfigOrExit } from '../src/config/index.js';
import { ensureServices, machine, snapshot, versions } from './lib/environment.js';
import { HELP, parseOptions, type BenchOptions, type ScenarioName } from './lib/options.js';
import { writeReport, type ScenarioReport } from './lib/report.js';
import { countSqlStatements } from './lib/measure.js';
import type { Scenario } from './lib/context.js';
import { saturate } from './scenarios/saturate.js';
import { steady } from './scenarios/steady.js';
import { priority } from './scenarios/priority.js';
import { throughput } from './scenarios/throughput.js';
import { direct } from './scenarios/direct.js';
import { scale } from './scenarios/scale.js';

const SCENARIO_RUNNERS: Record<ScenarioName, Scenario> = { saturate, steady, priority, throughput, direct, scale };

const log = (line: string): void => void process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

async function main(): Promise<void> {
  let options: BenchOptions;
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${HELP}\n`);
    process.exitCode = 2;
    return;
  }
  if (options.help) {
    process.stdout.write(`${HELP}\n`);
    return;
  }
  const config = loadConfigOrExit();
  // Installed before any pg client exists so every statement of the run is counted.
  countSqlStatements();
  await ensureServices(config, log);
  const record = { machine: machine(), versions: await versions(config) };
  const previous = new Map<ScenarioName, ScenarioReport>();
  const summaries: string[] = [];
  for (const name of options.scenarios) {
    log(`scenario ${name}`);
    const before = snapshot();
    const started = Date.now();
    const outcome = await SCENARIO_RUNNERS[name]({ config, options, log: (line) => log(`${name}: ${line}`), previous });
    const report: ScenarioReport = {
      scenario: name,
      date: new Date(started).toISOString(),
      wallSeconds: Math.round((Date.now() - started) / 1000),
      ...record,
      before,
      after: snapshot(),
      ...outcome,
    };
    previous.set(name, report);
    summaries.push(writeReport(report));
    log(`scenario ${name} done in ${report.wallSeconds} s → bench/results/${name}.md`);
  }
  process.stdout.write(`${summaries.join('\n')}`);
}

try {
  await main();
} catch (error) {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
}
// Worker runtimes and pools may keep handles open after close; the run is over.
process.exit();
