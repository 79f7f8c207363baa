/**
 * Figures of other scenarios that a summary refers to: from this invocation when it ran them,
 * else from their last result file (with its date, so an old figure is visibly old).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ScenarioContext } from './context.js';
import { RESULTS_DIR } from './report.js';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** Executions per second the orchestration sustained in the throughput scenario. */
export function orchestrationThroughput(context: ScenarioContext): { perSecond: number; date: string } | undefined {
  const fresh = context.previous.get('throughput');
  if (fresh && typeof fresh.results.executionsPerSecond === 'number') return { perSecond: fresh.results.executionsPerSecond, date: fresh.date };
  const file = join(RESULTS_DIR, 'throughput.json');
  if (!existsSync(file)) return undefined;
  const saved: unknown = JSON.parse(readFileSync(file, 'utf8'));
  if (!isRecord(saved) || !isRecord(saved.results) || typeof saved.results.executionsPerSecond !== 'number' || typeof saved.date !== 'string') return undefined;
  return { perSecond: saved.results.executionsPerSecond, date: saved.date };
}

/** A note comparing a scenario's execution rate with the machine's measured ceiling. */
export function capacityNote(context: ScenarioContext, executionsPerSecond: number, neededPerSecond: number): string {
  const ceiling = orchestrationThroughput(context);
  const base = `The orchestration executed ${Math.round(executionsPerSecond * 10) / 10} cards/s in the window; the load needs ${Math.round(neededPerSecond * 10) / 10}/s.`;
  return ceiling
    ? `${base} The throughput scenario measured a ceiling of ${ceiling.perSecond}/s on this machine (${ceiling.date}): when the need is above it, the gap is executor capacity, not the budget.`
    : base;
}
