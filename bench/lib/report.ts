/**
 * The record of one scenario run: <out>/<scenario>.json (everything measured, plus the machine,
 * its load before and during the run, versions and configuration that qualify it, and whether the
 * figures are valid) and <scenario>.md (validity, the summary table, each target with its figure,
 * and where the time went).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Machine, MachineSnapshot, Versions } from './environment.js';
import type { DuringSummary, GateResult } from './machineLoad.js';
import { renderVerdict, type Verdict } from './verdict.js';

export const RESULTS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'results');

export interface Table {
  readonly headers: readonly string[];
  /** Right-aligned columns (numbers). */
  readonly numeric: readonly boolean[];
  readonly rows: readonly (readonly (string | number)[])[];
}

/** What a scenario hands back; the runner adds the machine record around it. */
export interface ScenarioOutcome {
  readonly title: string;
  /** One line per definition needed to read the table. */
  readonly explain: readonly string[];
  readonly config: Readonly<Record<string, unknown>>;
  readonly results: Readonly<Record<string, unknown>>;
  readonly tables: readonly Table[];
  /** Every target this scenario checks, with its figure; empty for reference measurements. */
  readonly verdicts: readonly Verdict[];
  /** "Where the time goes": what the measurements say about the cost. */
  readonly notes: readonly string[];
}

export interface MachineLoad {
  /** The ~3 s sample taken before anything started. */
  readonly beforeRun: GateResult;
  /** Samples taken while this scenario ran. */
  readonly during: DuringSummary;
}

export interface ScenarioReport extends ScenarioOutcome {
  readonly scenario: string;
  /** False when the machine was busy before or during the run: the figures do not describe this code. */
  readonly valid: boolean;
  readonly invalidReasons: readonly string[];
  /** Set for scenarios that only count (bytes, rows, events): valid whatever the load; how busy it was. */
  readonly loadIndependent?: { readonly busyReasons: readonly string[] };
  readonly date: string;
  readonly wallSeconds: number;
  readonly machine: Machine;
  readonly machineLoad: MachineLoad;
  readonly before: MachineSnapshot;
  readonly after: MachineSnapshot;
  readonly versions: Versions;
}

export function renderTable(table: Table): string[] {
  return [
    `| ${table.headers.join(' | ')} |`,
    `| ${table.numeric.map((n) => (n ? '---:' : '---')).join(' | ')} |`,
    ...table.rows.map((row) => `| ${row.join(' | ')} |`),
  ];
}

/** The validity paragraph: first thing a reader sees. */
export function validityLines(valid: boolean, reasons: readonly string[], load: MachineLoad, busyButCounting?: readonly string[]): string[] {
  const g = load.beforeRun.sample;
  const d = load.during;
  const figures =
    `Before the run (${g.seconds} s): load average 1 min ${g.loadAverage1m} (limit ${load.beforeRun.limits.loadAverage1m}), ` +
    `other processes ${g.othersCores} cores (limit ${load.beforeRun.limits.othersCores}), steal ${g.stealCores}. ` +
    (d.samples === 0
      ? 'During it: not sampled (shorter than one 5 s sample).'
      : `During it (${d.samples} samples of 5 s): other processes ${d.othersMeanCores} cores on average (limit ` +
        `${d.limitOthersMeanCores}), max ${d.othersMaxCores}; ` +
        `ours (bench process + services) ${d.oursMeanCores}; steal ${d.stealMeanCores}; load average 1 min up to ${d.loadAverage1mMax}.`);
  if (busyButCounting !== undefined) {
    const busy =
      busyButCounting.length > 0 ? `the machine was busy (${busyButCounting.join('; ')}), which changed the run's duration only` : 'the machine was quiet';
    return [`**Valid on any machine:** these figures are counts (bytes, rows, events, actions), not rates; ${busy}. ${figures}`];
  }
  if (valid) return [`**Valid:** the machine was quiet. ${figures}`];
  return [`**INVALID — do not quote these figures:** ${reasons.join('; ')}.`, '', figures];
}

export function markdown(report: ScenarioReport): string {
  const v = report.versions;
  const m = report.machine;
  const lines = [
    `# Benchmark ${report.scenario}: ${report.title} (${report.date})`,
    '',
    ...validityLines(report.valid, report.invalidReasons, report.machineLoad, report.loadIndependent?.busyReasons),
    '',
    `Machine: ${m.cores} cores (${m.cpuModel}), ${m.memoryMb} MB; load average ${report.before.loadAverage.join(' / ')} before, ` +
      `${report.after.loadAverage.join(' / ')} after. Temporal database ${report.before.temporalDbMb ?? '?'} MB before. Wall time ${report.wallSeconds} s.`,
    `Versions: Node ${v.node}, ${v.temporalCli}, Redis ${v.redis}, PostgreSQL ${v.postgres}; code at ${v.commit}.`,
    `Configuration: ${Object.entries(report.config)
      .map(([k, value]) => `${k}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
      .join(', ')}.`,
    '',
    ...report.explain,
    '',
  ];
  for (const table of report.tables) lines.push(...renderTable(table), '');
  lines.push('## Targets and checks', '');
  if (report.verdicts.length === 0) lines.push('- No target applies to this scenario: its figures are a reference for the others.');
  else lines.push(...report.verdicts.map((verdict) => `- ${renderVerdict(verdict, report.valid)}`));
  if (report.notes.length > 0) lines.push('', '## Where the time goes', '', ...report.notes.map((note) => `- ${note}`));
  return `${lines.join('\n')}\n`;
}

export function writeReport(report: ScenarioReport, outDir: string): string {
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `${report.scenario}.json`), `${JSON.stringify(report, null, 2)}\n`);
  const text = markdown(report);
  writeFileSync(join(outDir, `${report.scenario}.md`), text);
  return text;
}
