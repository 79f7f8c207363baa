/**
 * Field names of a card's due hash (docs/design.md, 'Keys'). The Lua scripts spell the same names in
 * `lua/includes/dueHash.lua`, which also has `ups` (an upsert landed during the claim), a field
 * only the scripts read and write; finish logic elsewhere builds its `set` / `del` lists from here.
 */
import type { CheckType } from '../workflow-safe/checkTypes.js';

/** Per-check-type field prefixes; the field is `<prefix><type>`. */
export const DUE_FIELD_PREFIX = {
  /** Next due (ms). */
  due: 'due:',
  /** Last success (ms); request-check cooldown reads it. */
  ok: 'ok:',
  /** Consecutive failures. */
  fail: 'fail:',
  /** First failure of the current streak (ms). */
  firstFail: 'ffail:',
  /** Last error, `class|message`. */
  error: 'err:',
  /** Pending confirmation delays, seconds, comma-separated. */
  confirm: 'cfm:',
  /** Expected confirmation result. */
  expected: 'exp:',
  /** Time (ms) of a pending request-check; finish keeps due ≤ it when made after the claim. */
  request: 'req:',
} as const;

export type DueFieldKind = keyof typeof DUE_FIELD_PREFIX;

/** `1` = go to the priority lane at finish. */
export const FIELD_PRIORITY = 'prio';
/** Carrier account id the card is polled under. */
export const FIELD_CARRIER = 'carrier';
/**
 * Gateway types the current claim deferred because their group's budget was closed that round
 * (comma-separated; absent or '' = none): the execution does not run them and they stay due.
 * Written by a claim that defers something, dropped by every other claim, finish and release
 * (`lua/claim.lua`).
 */
export const FIELD_DEFERRED = 'dfr';

export function dueField(kind: DueFieldKind, type: CheckType): string {
  return `${DUE_FIELD_PREFIX[kind]}${type}`;
}

/** Shorthands for building finish `set` / `del` lists. */
export const DueField = {
  due: (type: CheckType): string => dueField('due', type),
  ok: (type: CheckType): string => dueField('ok', type),
  fail: (type: CheckType): string => dueField('fail', type),
  firstFail: (type: CheckType): string => dueField('firstFail', type),
  error: (type: CheckType): string => dueField('error', type),
  confirm: (type: CheckType): string => dueField('confirm', type),
  expected: (type: CheckType): string => dueField('expected', type),
  request: (type: CheckType): string => dueField('request', type),
} as const;
