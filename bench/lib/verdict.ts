/**
 * A target check as the report prints it: what was measured, the figure, the target, and whether
 * it was met — never a bare "within expectations". Targets are the scenarios' own
 * (benchmarks on this machine, not timed tests).
 */
export interface Verdict {
  /** What was measured, e.g. "lateness p99". */
  readonly what: string;
  /** The figure with its unit, e.g. "1.4 s". */
  readonly figure: string;
  /** The target with its comparison, e.g. "≤ 2 s". */
  readonly target: string;
  /** null: not checked (see `note`). */
  readonly met: boolean | null;
  /** The raw numbers behind `figure` and `target`, for readers of the JSON. */
  readonly value?: number;
  readonly limit?: number;
  readonly note?: string;
}

export type Format = (value: number) => string;

export const plain: Format = (value) => String(Math.round(value * 100) / 100);
export const seconds: Format = (ms) => `${Math.round(ms / 10) / 100} s`;
export const perSecond: Format = (value) => `${Math.round(value * 10) / 10}/s`;
export const percent: Format = (share) => `${Math.round(share * 1000) / 10} %`;
export const times: Format = (ratio) => `${Math.round(ratio * 100) / 100}×`;

export function atMost(what: string, value: number, limit: number, format: Format = plain, note?: string): Verdict {
  return { what, figure: format(value), target: `≤ ${format(limit)}`, met: value <= limit, value, limit, ...(note ? { note } : {}) };
}

export function atLeast(what: string, value: number, limit: number, format: Format = plain, note?: string): Verdict {
  return { what, figure: format(value), target: `≥ ${format(limit)}`, met: value >= limit, value, limit, ...(note ? { note } : {}) };
}

/** Counts that must be zero (rejected calls, expired leases). */
export function none(what: string, count: number, note?: string): Verdict {
  return { what, figure: String(count), target: '= 0', met: count === 0, value: count, limit: 0, ...(note ? { note } : {}) };
}

export function notChecked(what: string, target: string, why: string): Verdict {
  return { what, figure: 'not measured', target, met: null, note: why };
}

/** "lateness p99 1.4 s — target ≤ 2 s: met" (plus the note, and a warning when the run is invalid). */
export function renderVerdict(verdict: Verdict, valid: boolean): string {
  const state = verdict.met === null ? 'not checked' : verdict.met ? 'met' : '**missed**';
  const note = verdict.note ? ` (${verdict.note})` : '';
  const trust = valid || verdict.met === null ? '' : ' — run invalid, figure not trustworthy';
  return `${verdict.what} ${verdict.figure} — target ${verdict.target}: ${state}${note}${trust}`;
}
