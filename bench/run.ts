/**
 * `npm run bench [-- --scenario NAME] [--help]`: checks the machine is quiet, starts the services
 * it needs (as `npm run services:up` would), runs the chosen scenarios one after the other (ceiling
 * and throughput first: the others build on their figures), writes <out>/<scenario>.json + .md
 * for each and prints the Markdown summaries at the end. Figures are measurements, not
 * assertions: nothing here fails on a missed target, the summary says so instead — but a run on a
 * busy machine is refused (or, with --allow-busy, marked invalid), unless every chosen scenario
 * only counts things (footprint: bytes, rows, events), which a busy machine does not change.
 */
import { loadConfigOrExit } from '../src/config/index.js';
import { ensureServices, freshTemporalDatabase, machine, snapshot, versions } from './lib/environment.js';
import { HELP, parseOptions, type BenchOptions, type ScenarioName } from './lib/options.js';
import { writeReport, type ScenarioReport } from './lib/report.js';
import { countSqlStatements } from './lib/measure.js';
import { checkBeforeRun, invalidReasons, startLoadMonitor } from './lib/machineLoad.js';
import type { Measured, Scenario } from './lib/context.js';
import { ceiling } from './scenarios/ceiling.js';
import { saturate } from './scenarios/saturate.js';
import { steady } from './scenarios/steady.js';
import { priority } from './scenarios/priority.js';
import { overload } from './scenarios/overload.js';
import { throughput } from './scenarios/throughput.js';
import { direct } from './scenarios/direct.js';
import { scale } from './scenarios/scale.js';
import { ingest } from './ingest.js';
import { footprint } from './scenarios/footprint.js';
import { cluster } from './scenarios/cluster.js';
import { accounts } from './scenarios/accounts.js';
import { burst } from './scenarios/burst.js';
import { sweep } from './scenarios/sweep.js';
import { freshness } from './scenarios/freshness.js';

const SCENARIO_RUNNERS: Record<ScenarioName, Scenario> = {
  ceiling,
  throughput,
  saturate,
  steady,
  priority,
  overload,
  burst,
  sweep,
  freshness,
  direct,
  scale,
  ingest,
  footprint,
  accounts,
  cluster,
};
/** Scenarios whose figures are counts (bytes, rows, events, actions), not rates: valid on a busy machine. */
const LOAD_INDEPENDENT: ReadonlySet<ScenarioName> = new Set<ScenarioName>(['footprint']);
/** A database the first scenario may inherit: a dev server just started holds a few MB. */
const SMALL_TEMPORAL_DB_MB = 50;
/** Exit code of a run refused because the machine was busy. */
const EXIT_BUSY = 3;

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
  // Before anything of ours starts: what runs now is other work.
  log('sampling the machine for 3 s before the run');
  const gate = await checkBeforeRun();
  const timed = options.scenarios.filter((name) => !LOAD_INDEPENDENT.has(name));
  if (gate.reasons.length > 0) {
    if (!options.allowBusy && timed.length > 0) {
      process.stderr.write(
        `Refusing to benchmark: the machine is busy.\n- ${gate.reasons.join('\n- ')}\nWait for it to be quiet, or pass ` +
          `--allow-busy (every result is then marked invalid).\n`,
      );
      process.exitCode = EXIT_BUSY;
      return;
    }
    log(
      `machine busy (${gate.reasons.join('; ')}): running anyway, ` +
        `${timed.length > 0 ? 'every timed result marked invalid' : 'the chosen scenarios only count, their figures stay valid'}`,
    );
  }
  // Installed before any pg client exists so every statement of the run is counted.
  countSqlStatements();
  await ensureServices(config, log);
  const monitor = startLoadMonitor(config.DATA_DIR);
  const record = { machine: machine(), versions: await versions(config) };
  const previous = new Map<ScenarioName, ScenarioReport>();
  const measured: Measured = { cardRuns: [] };
  const summaries: string[] = [];
  try {
    for (const [index, name] of options.scenarios.entries()) {
      log(`scenario ${name}`);
      // The first scenario too: services reused from an earlier run keep that run's database (the
      // overload runs of 2026-12-06 started on 3.8, 6.1 and 8.4 GB), unless it is still small.
      const inherited = index === 0 ? (snapshot(config).temporalDbMb ?? 0) : Number.POSITIVE_INFINITY;
      if (inherited > SMALL_TEMPORAL_DB_MB && !options.keepTemporalDb && !LOAD_INDEPENDENT.has(name)) {
        const was = await freshTemporalDatabase(config, log);
        if (was !== null) log(`fresh Temporal database for ${name} (the previous one had grown to ${was} MB)`);
      }
      const before = snapshot(config);
      const started = Date.now();
      const outcome = await SCENARIO_RUNNERS[name]({ config, options, log: (line) => log(`${name}: ${line}`), previous, measured });
      const during = monitor.summary(started, Date.now());
      const busy = invalidReasons(gate, during);
      const independent = LOAD_INDEPENDENT.has(name);
      const reasons = independent ? [] : busy;
      const report: ScenarioReport = {
        scenario: name,
        valid: reasons.length === 0,
        invalidReasons: reasons,
        ...(independent ? { loadIndependent: { busyReasons: busy } } : {}),
        date: new Date(started).toISOString(),
        wallSeconds: Math.round((Date.now() - started) / 1000),
        ...record,
        machineLoad: { beforeRun: gate, during },
        before,
        after: snapshot(config),
        ...outcome,
      };
      previous.set(name, report);
      summaries.push(writeReport(report, options.outDir));
      log(`scenario ${name} done in ${report.wallSeconds} s${report.valid ? '' : ' (INVALID: machine busy)'} → ${options.outDir}/${name}.md`);
    }
  } finally {
    monitor.stop();
  }
  process.stdout.write(`${summaries.join('\n')}`);
  const invalid = [...previous.values()].filter((report) => !report.valid).map((report) => report.scenario);
  if (invalid.length > 0) process.stdout.write(`\nINVALID (machine busy): ${invalid.join(', ')} — do not quote these figures.\n`);
}

try {
  await main();
} catch (error) {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
}
// Worker runtimes and pools may keep handles open after close; the run is over.
process.exit();
