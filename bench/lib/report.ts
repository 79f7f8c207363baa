/**
 * The record of one scenario run: bench/results/<scenario>.json (everything measured, plus the
 * machine, load, versions and configuration that qualify it) and <scenario>.md (the summary
 * table, expectation misses and where the time went), in the style of bench/results/lua.md.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Machine, MachineSnapshot, Versions } from './environment.js';

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
  /** Figures far from DESIGN §11's expectations, one sentence each. */
  readonly misses: readonly string[];
  /** "Where the time goes": what the measurements say about the cost. */
  readonly notes: readonly string[];
}

export interface ScenarioReport extends ScenarioOutcome {
  readonly scenario: string;
  readonly date: string;
  readonly wallSeconds: number;
  readonly machine: Machine;
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

export function markdown(report: ScenarioReport): string {
  const v = report.versions;
  const m = report.machine;
  const lines = [
    `# Benchmark ${report.scenario}: ${report.title} (${report.date})`,
    '',
    `Machine: ${m.cores} cores (${m.cpuModel}), ${m.memoryMb} MB; load average ${report.before.loadAverage.join(' / ')} before, ` +
      `${report.after.loadAverage.join(' / ')} after (shared machine: other work ran alongside). Wall time ${report.wallSeconds} s.`,
    `Versions: Node ${v.node}, ${v.temporalCli}, Redis ${v.redis}, PostgreSQL ${v.postgres}; code at ${v.commit}.`,
    `Configuration: ${Object.entries(report.config).map(([k, value]) => `${k}=${typeof value === 'string' ? value : JSON.stringify(value)}`).join(', ')}.`,
    '',
    ...report.explain,
    '',
  ];
  for (const table of report.tables) lines.push(...renderTable(table), '');
  lines.push('## Against DESIGN §11', '');
  if (report.misses.length === 0) lines.push('- Within expectations.');
  else lines.push(...report.misses.map((miss) => `- **Far from expectation:** ${miss}`));
  if (report.notes.length > 0) lines.push('', '## Where the time goes', '', ...report.notes.map((note) => `- ${note}`));
  return `${lines.join('\n')}\n`;
}

export function writeReport(report: ScenarioReport): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  writeFileSync(join(RESULTS_DIR, `${report.scenario}.json`), `${JSON.stringify(report, null, 2)}\n`);
  const text = markdown(report);
  writeFileSync(join(RESULTS_DIR, `${report.scenario}.md`), text);
  return text;
}
