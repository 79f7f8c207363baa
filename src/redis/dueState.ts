/**
 * Typed view of a card's due hash (docs/design.md, 'Keys'), parsed in one place.
 */
import { CHECK_TYPES, isCheckType, type CheckType } from '../workflow-safe/checkTypes.js';
import { DUE_FIELD_PREFIX, FIELD_CARRIER, FIELD_DEFERRED, FIELD_PRIORITY, dueField } from './dueFields.js';

export interface TypeDueState {
  /** Next due (ms); null when the type is not polled. */
  readonly due: number | null;
  /** Last success (ms). */
  readonly ok: number | null;
  /** Consecutive failures (0 when none). */
  readonly fail: number;
  /** First failure of the streak (ms). */
  readonly ffail: number | null;
  /** Last error `class|message`. */
  readonly err: string | null;
  /** Pending confirmation delays (seconds). */
  readonly cfm: number[];
  /** Expected confirmation result. */
  readonly exp: string | null;
  /** Pending request-check time (ms). */
  readonly req: number | null;
}

export interface DueState {
  readonly carrier: string | null;
  /** Go to the priority lane at finish. */
  readonly prio: boolean;
  /** Types the current claim deferred (their group's budget was closed): not run by this execution. */
  readonly deferred: readonly CheckType[];
  readonly types: Readonly<Record<CheckType, TypeDueState>>;
}

function toMs(raw: string | undefined): number | null {
  if (raw === undefined || raw === '') return null;
  const value = Number(raw);
  return Number.isFinite(value) ? value : null;
}

/** Parses the comma-separated delays, ignoring junk rather than failing a whole card on it. */
export function parseConfirmDelays(raw: string | undefined): number[] {
  if (raw === undefined || raw === '') return [];
  return raw
    .split(',')
    .map((part) => Number(part.trim()))
    .filter((seconds) => Number.isInteger(seconds) && seconds > 0);
}

export function formatConfirmDelays(delaysSec: readonly number[]): string {
  return delaysSec.map((seconds) => String(Math.trunc(seconds))).join(',');
}

function parseType(raw: Readonly<Record<string, string>>, type: CheckType): TypeDueState {
  const fail = Number(raw[dueField('fail', type)] ?? '0');
  return {
    due: toMs(raw[dueField('due', type)]),
    ok: toMs(raw[dueField('ok', type)]),
    fail: Number.isInteger(fail) && fail > 0 ? fail : 0,
    ffail: toMs(raw[dueField('firstFail', type)]),
    err: raw[dueField('error', type)] ?? null,
    cfm: parseConfirmDelays(raw[dueField('confirm', type)]),
    exp: raw[dueField('expected', type)] ?? null,
    req: toMs(raw[`${DUE_FIELD_PREFIX.request}${type}`]),
  };
}

/** Parses an HGETALL reply; null for an empty (missing) hash. */
export function parseDueHash(raw: Readonly<Record<string, string>>): DueState | null {
  if (Object.keys(raw).length === 0) return null;
  const types = {} as Record<CheckType, TypeDueState>;
  for (const type of CHECK_TYPES) types[type] = parseType(raw, type);
  return {
    carrier: raw[FIELD_CARRIER] ?? null,
    prio: raw[FIELD_PRIORITY] === '1',
    deferred: (raw[FIELD_DEFERRED] ?? '').split(',').filter(isCheckType),
    types,
  };
}
