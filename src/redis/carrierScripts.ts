/**
 * The Lua scripts of the carrier queue (docs/design.md, 'Lua scripts'): their definitions, and the
 * one place that builds their KEYS/ARGV and parses their replies. Pure functions, so tests can
 * inspect the keys a script receives (cluster slot check) without Redis.
 */
import { GATEWAY_CHECK_TYPES, type CheckType } from '../workflow-safe/checkTypes.js';
import type { AccountKeys } from './keys.js';
import { formatConfirmDelays } from './dueState.js';
import type { ScriptDefinition } from './scriptLoader.js';
import { InvalidStoreInputError, SCRIPT_CODE, ScriptArgumentError, UnexpectedScriptReplyError, expectCode } from './storeErrors.js';

export const CARRIER_SCRIPTS = {
  claimCandidates: { name: 'claimCandidates', numberOfKeys: 3 },
  // Three keys per card the round may touch (its candidates), after the account's three.
  claim: { name: 'claim', numberOfKeys: 'variable' },
  acquireExec: { name: 'acquireExec', numberOfKeys: 2 },
  renew: { name: 'renew', numberOfKeys: 5 },
  // Two keys per card held, after the account's three.
  holdClaims: { name: 'holdClaims', numberOfKeys: 'variable' },
  finish: { name: 'finish', numberOfKeys: 7 },
  release: { name: 'release', numberOfKeys: 6 },
  requestCheck: { name: 'requestCheck', numberOfKeys: 5 },
  upsert: { name: 'upsert', numberOfKeys: 5 },
  remove: { name: 'remove', numberOfKeys: 3 },
  markIdle: { name: 'markIdle', numberOfKeys: 4 },
  wakeIfIdle: { name: 'wakeIfIdle', numberOfKeys: 1 },
  observed: { name: 'observed', numberOfKeys: 5 },
} as const satisfies Record<string, ScriptDefinition>;

export type CarrierScriptName = keyof typeof CARRIER_SCRIPTS;

export interface ScriptCall {
  readonly name: CarrierScriptName;
  readonly keys: readonly string[];
  readonly args: readonly (string | number)[];
}

/** "now" as a script argument: '' lets the script read Redis' clock (TIME). */
export type NowArg = number | '';

// Card ids end tokens (`<prefix>@<ms>:<cardId>`), so they may not contain ':' (claim parses the suffix)
// nor '|' (exec records are `<token>|<value>`).
const CARD_ID = /^[A-Za-z0-9_.-]+$/;
// Group and type names travel as `a=b;c=d`.
const LIST_ITEM = /^[^=;]+$/;

export function assertCardId(script: string, cardId: string): void {
  if (!CARD_ID.test(cardId)) throw new InvalidStoreInputError(script, 'cardId', `"${cardId}" must match ${CARD_ID}`);
}

function assertPositive(script: string, field: string, value: number): void {
  if (!Number.isFinite(value) || value <= 0) throw new InvalidStoreInputError(script, field, `${value} must be > 0`);
}

function encodeMap(script: string, field: string, map: Readonly<Record<string, string | number>>): string {
  return Object.entries(map)
    .map(([key, value]) => {
      if (!LIST_ITEM.test(key) || !LIST_ITEM.test(String(value)))
        throw new InvalidStoreInputError(script, field, `"${key}=${String(value)}" may not contain '=' or ';'`);
      return `${key}=${String(value)}`;
    })
    .join(';');
}

// ---------- claim ----------

export interface ClaimArgs {
  readonly now: NowArg;
  readonly leaseMs: number;
  readonly inflightLimit: number;
  /**
   * In-flight limit of the priority lane (>= inflightLimit; default inflightLimit): priority cards
   * may be claimed past `inflightLimit` up to it, normal ones never.
   */
  readonly priorityInflightLimit?: number;
  /** 0 = unlimited. */
  readonly priorityRatio: number;
  readonly tokenPrefix: string;
  /** Remaining budget per group this round; undefined = no budget; a group not listed is unlimited. */
  readonly groupBudget?: Readonly<Record<string, number>>;
  readonly typeGroups: Readonly<Record<string, string>>;
  readonly countRealname: boolean;
  /**
   * A retry of a round whose first attempt may have claimed already: hand back the claims this
   * token prefix holds instead of claiming more (their cards are scored past now by then).
   */
  readonly retry?: boolean;
  /**
   * Claim cards due up to this many ms after now (default 0): dispatching ahead by the engine's
   * start lag lets a run start at its due time instead of that long after it.
   */
  readonly dueHorizonMs?: number;
  /**
   * The check types the account polls under any card status (its enabled configs); absent = not
   * known. A budgeted round drops a long-overdue due of a gateway type outside it (lua/claim.lua).
   */
  readonly polledTypes?: readonly CheckType[];
  /**
   * The cards the round may touch (claimCandidatesCall's reply): their keys are declared. A due
   * card not listed is left for the next round.
   */
  readonly cards?: readonly string[];
}

export interface ClaimedCard {
  readonly cardId: string;
  readonly token: string;
  readonly fromPriority: boolean;
}

export interface ClaimResult {
  /** Running tokens whose lease had expired and were reclaimed this round. */
  readonly expired: number;
  readonly claimed: ClaimedCard[];
}

/** The priority lane's in-flight limit: inflightLimit unless a larger whole number is given. */
function priorityLimitOf(script: string, input: ClaimArgs): number {
  const limit = input.priorityInflightLimit ?? input.inflightLimit;
  if (!Number.isInteger(limit) || limit < input.inflightLimit)
    throw new InvalidStoreInputError(script, 'priorityInflightLimit', 'must be an integer >= inflightLimit');
  return limit;
}

/** The cards a claim round with these arguments may touch (lua/claimCandidates.lua). */
export function claimCandidatesCall(keys: AccountKeys, input: ClaimArgs): ScriptCall {
  const priorityInflightLimit = priorityLimitOf('claimCandidates', input);
  return {
    name: 'claimCandidates',
    keys: [keys.prio, keys.queue, keys.running],
    args: [input.now, input.inflightLimit, Math.max(0, Math.floor(input.dueHorizonMs ?? 0)), input.tokenPrefix, input.retry ? '1' : '0', priorityInflightLimit],
  };
}

export function parseClaimCandidatesReply(reply: unknown): string[] {
  if (!Array.isArray(reply)) {
    expectCode('claimCandidates', reply, []);
    throw new UnexpectedScriptReplyError('claimCandidates', reply);
  }
  const ids = reply as unknown[];
  if (!ids.every((id): id is string => typeof id === 'string')) throw new UnexpectedScriptReplyError('claimCandidates', reply);
  // Ids that could not name keys safely are left out (assertCardId rules); they were never upserted.
  return ids.filter((id) => CARD_ID.test(id));
}

export function claimCall(keys: AccountKeys, input: ClaimArgs): ScriptCall {
  const script = 'claim';
  assertPositive(script, 'leaseMs', input.leaseMs);
  if (!Number.isInteger(input.inflightLimit)) throw new InvalidStoreInputError(script, 'inflightLimit', 'must be an integer');
  const priorityInflightLimit = priorityLimitOf(script, input);
  if (!(input.priorityRatio >= 0)) throw new InvalidStoreInputError(script, 'priorityRatio', 'must be >= 0');
  if (input.tokenPrefix === '' || input.tokenPrefix.includes('|')) throw new InvalidStoreInputError(script, 'tokenPrefix', "must be non-empty without '|'");
  let budget = '';
  if (input.groupBudget !== undefined) {
    const rounded = Object.fromEntries(Object.entries(input.groupBudget).map(([g, n]) => [g, Math.floor(n)]));
    budget = encodeMap(script, 'groupBudget', rounded);
    // An empty map still means "budgeted", with every group unlimited; '' would mean unbudgeted.
    if (budget === '') budget = ';';
  }
  const cards = input.cards ?? [];
  for (const cardId of cards) assertCardId(script, cardId);
  return {
    name: script,
    keys: [keys.prio, keys.queue, keys.running, ...cards.flatMap((cardId) => [keys.due(cardId), keys.claim(cardId), keys.exec(cardId)])],
    args: [
      input.now,
      Math.floor(input.leaseMs),
      input.inflightLimit,
      input.priorityRatio,
      input.tokenPrefix,
      budget,
      encodeMap(script, 'typeGroups', input.typeGroups),
      input.countRealname ? '1' : '0',
      GATEWAY_CHECK_TYPES.join(','),
      input.retry ? '1' : '0',
      Math.max(0, Math.floor(input.dueHorizonMs ?? 0)),
      // ',' = known and empty (the account polls nothing); '' = not known.
      input.polledTypes === undefined ? '' : input.polledTypes.join(',') || ',',
      priorityInflightLimit,
      ...cards,
    ],
  };
}

export function parseClaimReply(reply: unknown): ClaimResult {
  if (!Array.isArray(reply)) {
    expectCode('claim', reply, []);
    throw new UnexpectedScriptReplyError('claim', reply);
  }
  const [expired, ...rest] = reply as unknown[];
  if (typeof expired !== 'number' || rest.length % 3 !== 0) throw new UnexpectedScriptReplyError('claim', reply);
  const claimed: ClaimedCard[] = [];
  for (let i = 0; i < rest.length; i += 3) {
    const [cardId, token, fromPriority] = rest.slice(i, i + 3);
    if (typeof cardId !== 'string' || typeof token !== 'string') throw new UnexpectedScriptReplyError('claim', reply);
    claimed.push({ cardId, token, fromPriority: fromPriority === '1' });
  }
  return { expired, claimed };
}

// ---------- per-card scripts ----------

export type AcquireExecResult = 'acquired' | 'lost' | 'busy';

export function acquireExecCall(keys: AccountKeys, cardId: string, token: string, executorId: string, ttlMs: number, now: NowArg): ScriptCall {
  assertCardId('acquireExec', cardId);
  assertPositive('acquireExec', 'ttlMs', ttlMs);
  return {
    name: 'acquireExec',
    keys: [keys.exec(cardId), keys.running],
    args: [token, executorId, Math.ceil(ttlMs), now],
  };
}

export function parseAcquireExecReply(reply: unknown): AcquireExecResult {
  const code = expectCode('acquireExec', reply, [SCRIPT_CODE.ok, SCRIPT_CODE.lost, SCRIPT_CODE.execBusy]);
  if (code === SCRIPT_CODE.ok) return 'acquired';
  return code === SCRIPT_CODE.lost ? 'lost' : 'busy';
}

export function renewCall(keys: AccountKeys, cardId: string, token: string, executorId: string, leaseMs: number, now: NowArg): ScriptCall {
  assertCardId('renew', cardId);
  assertPositive('renew', 'leaseMs', leaseMs);
  return {
    name: 'renew',
    keys: [keys.claim(cardId), keys.exec(cardId), keys.running, keys.prio, keys.queue],
    args: [token, executorId, Math.ceil(leaseMs), now, cardId],
  };
}

/** A claim to hold: the card and the token that claimed it. */
export interface HeldClaim {
  readonly cardId: string;
  readonly token: string;
}

export function holdClaimsCall(keys: AccountKeys, claims: readonly HeldClaim[], leaseMs: number, now: NowArg): ScriptCall {
  assertPositive('holdClaims', 'leaseMs', leaseMs);
  const cardKeys: string[] = [];
  const args: (string | number)[] = [Math.ceil(leaseMs), now];
  for (const { cardId, token } of claims) {
    assertCardId('holdClaims', cardId);
    if (token === '') throw new InvalidStoreInputError('holdClaims', 'token', `card ${cardId}: may not be empty`);
    cardKeys.push(keys.claim(cardId), keys.exec(cardId));
    args.push(cardId, token);
  }
  return { name: 'holdClaims', keys: [keys.running, keys.prio, keys.queue, ...cardKeys], args };
}

/** How many of the claims were held. */
export function parseHoldClaimsReply(reply: unknown): number {
  if (typeof reply !== 'number') throw new UnexpectedScriptReplyError('holdClaims', reply);
  if (reply === SCRIPT_CODE.invalidArgument) throw new ScriptArgumentError('holdClaims');
  if (reply < 0) throw new UnexpectedScriptReplyError('holdClaims', reply);
  return reply;
}

/** Shared by renew, finish and release: 1 = done, 0 = the token lost its claim. */
export function parseOwnedReply(script: CarrierScriptName, reply: unknown): boolean {
  return expectCode(script, reply, [SCRIPT_CODE.ok, SCRIPT_CODE.lost]) === SCRIPT_CODE.ok;
}

export interface FinishArgs {
  readonly cardId: string;
  readonly token: string;
  readonly now: NowArg;
  readonly set: Readonly<Record<string, string | number>>;
  readonly del: readonly string[];
  /**
   * The caller's result, stored with the finish: a later finish by the same token with a record
   * applies nothing and gets this back (retried activities); kept for an hour (RECORD_TTL_MS in lua/finish.lua). Absent: no replay protection.
   */
  readonly record?: string;
  /** The caller lost its lease: write as a stale token, never release or rescore. */
  readonly leaseLost?: boolean;
}

export interface FinishReply {
  /** The token owned a live claim (released and rescored); on a replay, what the first call answered. */
  readonly owned: boolean;
  /** Set when an earlier finish by this token had already landed: its record; nothing was applied. */
  readonly replayed: string | null;
}

export function finishCall(keys: AccountKeys, input: FinishArgs): ScriptCall {
  assertCardId('finish', input.cardId);
  // The stored record is `<token>|<reply>|<record>`: the token must not contain the separator.
  if (input.token.includes('|')) throw new InvalidStoreInputError('finish', 'token', "may not contain '|'");
  const setEntries = Object.entries(input.set);
  const record = input.record ?? '';
  const args: (string | number)[] = [input.token, input.cardId, input.now, input.leaseLost === true ? '1' : '', record, setEntries.length];
  for (const [field, value] of setEntries) args.push(field, value);
  args.push(...input.del);
  const { cardId } = input;
  return {
    name: 'finish',
    // Every key the script touches is declared (Redis Cluster): the card's claim, exec and fin too.
    keys: [keys.due(cardId), keys.running, keys.prio, keys.queue, keys.claim(cardId), keys.exec(cardId), keys.finished(cardId)],
    args,
  };
}

export function parseFinishReply(reply: unknown): FinishReply {
  if (Array.isArray(reply)) {
    const [code, record] = reply as unknown[];
    if ((code !== SCRIPT_CODE.ok && code !== SCRIPT_CODE.lost) || typeof record !== 'string') throw new UnexpectedScriptReplyError('finish', reply);
    return { owned: code === SCRIPT_CODE.ok, replayed: record };
  }
  return { owned: parseOwnedReply('finish', reply), replayed: null };
}

export function releaseCall(keys: AccountKeys, cardId: string, token: string, now: NowArg, retryAfterMs = 0): ScriptCall {
  assertCardId('release', cardId);
  return {
    name: 'release',
    keys: [keys.claim(cardId), keys.exec(cardId), keys.running, keys.prio, keys.queue, keys.due(cardId)],
    args: [token, cardId, now, String(Math.max(0, Math.round(retryAfterMs)))],
  };
}

export type Lane = 'priority' | 'normal';

export interface RequestCheckArgs {
  readonly cardId: string;
  readonly now: NowArg;
  readonly cooldownMs: number;
  readonly confirmDelaysSec?: readonly number[];
  readonly expected?: string;
  readonly lane: Lane;
  readonly types: readonly CheckType[];
}

export type RequestCheckResult = { status: 'not_polled' } | { status: 'requested' | 'cooldown'; requested: number };

export function requestCheckCall(keys: AccountKeys, input: RequestCheckArgs): ScriptCall {
  assertCardId('requestCheck', input.cardId);
  if (input.types.length === 0) throw new InvalidStoreInputError('requestCheck', 'types', 'must not be empty');
  if (!(input.cooldownMs >= 0)) throw new InvalidStoreInputError('requestCheck', 'cooldownMs', 'must be >= 0');
  const { cardId } = input;
  return {
    name: 'requestCheck',
    keys: [keys.due(cardId), keys.prio, keys.queue, keys.claim(cardId), keys.running],
    args: [
      input.now,
      cardId,
      Math.floor(input.cooldownMs),
      formatConfirmDelays(input.confirmDelaysSec ?? []),
      input.expected ?? '',
      input.lane === 'priority' ? '1' : '0',
      ...input.types,
    ],
  };
}

export function parseRequestCheckReply(reply: unknown): RequestCheckResult {
  if (reply === SCRIPT_CODE.notPolled) return { status: 'not_polled' };
  if (typeof reply !== 'number' || reply < 0) {
    expectCode('requestCheck', reply, []);
    throw new UnexpectedScriptReplyError('requestCheck', reply);
  }
  return { status: reply > 0 ? 'requested' : 'cooldown', requested: reply };
}

export interface UpsertArgs {
  readonly carrierId: string;
  readonly cardId: string;
  readonly now: NowArg;
  readonly dues: Readonly<Partial<Record<CheckType, number>>>;
  /** Types whose write is conditional: see {@link UpsertInput.caps}. */
  readonly caps?: Readonly<Partial<Record<CheckType, number>>>;
}

export function upsertCall(keys: AccountKeys, input: UpsertArgs): ScriptCall {
  assertCardId('upsert', input.cardId);
  const { cardId } = input;
  const args: (string | number)[] = [input.now, input.carrierId, cardId];
  for (const [type, due] of Object.entries(input.dues)) {
    if (due === undefined) continue;
    if (!Number.isFinite(due)) throw new InvalidStoreInputError('upsert', `dues.${type}`, 'must be a finite number');
    const cap = input.caps?.[type as CheckType];
    if (cap === undefined) {
      args.push(type, Math.floor(due));
      continue;
    }
    if (!Number.isFinite(cap)) throw new InvalidStoreInputError('upsert', `caps.${type}`, 'must be a finite number');
    // `<init>,<cap>`: upsert.lua keeps the due the hash holds, at most lowered to the cap.
    args.push(type, `${Math.floor(due)},${Math.floor(cap)}`);
  }
  return {
    name: 'upsert',
    keys: [keys.due(cardId), keys.prio, keys.queue, keys.claim(cardId), keys.running],
    args,
  };
}

export function parseUpsertReply(reply: unknown): 'upserted' | 'removed' {
  return expectCode('upsert', reply, [1, 0]) === 1 ? 'upserted' : 'removed';
}

export function removeCall(keys: AccountKeys, cardId: string): ScriptCall {
  assertCardId('remove', cardId);
  return { name: 'remove', keys: [keys.prio, keys.queue, keys.due(cardId)], args: [cardId] };
}

export function parseRemoveReply(reply: unknown): boolean {
  return expectCode('remove', reply, [1, 0]) === 1;
}

// ---------- observed ----------

export interface ObservedArgs {
  readonly cardId: string;
  readonly now: NowArg;
  readonly type: CheckType;
  /** When the carrier saw the state (epoch ms). */
  readonly observedAtMs: number;
  readonly intervalMs: number;
  /** The state a confirmation compares (src/domain/finishPlan.ts observedState), if the type has one. */
  readonly state?: string;
}

/** What a pushed event did to the card's schedule (lua/observed.lua). */
export type ObservedResult = 'moved' | 'confirmed' | 'unchanged' | 'not_polled';

export function observedCall(keys: AccountKeys, input: ObservedArgs): ScriptCall {
  assertCardId('observed', input.cardId);
  assertPositive('observed', 'intervalMs', input.intervalMs);
  if (!Number.isFinite(input.observedAtMs)) throw new InvalidStoreInputError('observed', 'observedAtMs', `${input.observedAtMs} must be a number`);
  return {
    name: 'observed',
    keys: [keys.due(input.cardId), keys.prio, keys.queue, keys.claim(input.cardId), keys.running],
    args: [input.now, input.cardId, input.type, String(Math.round(input.observedAtMs)), String(Math.round(input.intervalMs)), input.state ?? ''],
  };
}

export function parseObservedReply(reply: unknown): ObservedResult {
  const code = expectCode('observed', reply, [2, 1, 0, -1]);
  return code === 2 ? 'confirmed' : code === 1 ? 'moved' : code === 0 ? 'unchanged' : 'not_polled';
}

// ---------- markIdle, wakeIfIdle ----------

export interface MarkIdleArgs {
  readonly now: NowArg;
  /** Longest sleep (> 0): an account with nothing in its lanes wakes this often. */
  readonly longestMs: number;
  /** The round's due horizon: a card is claimed this far ahead of its due time. */
  readonly horizonMs: number;
  /** Below this the scheduler keeps its tick (its tick length). */
  readonly shortestMs: number;
}

export function markIdleCall(keys: AccountKeys, args: MarkIdleArgs): ScriptCall {
  assertPositive('markIdle', 'longestMs', args.longestMs);
  const ms = (value: number): string => String(Math.max(0, Math.round(value)));
  return {
    name: 'markIdle',
    keys: [keys.prio, keys.queue, keys.running, keys.idle],
    args: [args.now, ms(args.longestMs), ms(args.horizonMs), ms(args.shortestMs)],
  };
}

/** How long the scheduler may sleep (ms); 0 = keep ticking. */
export function parseMarkIdleReply(reply: unknown): number {
  if (typeof reply !== 'number') throw new UnexpectedScriptReplyError('markIdle', reply);
  if (reply === SCRIPT_CODE.invalidArgument) throw new ScriptArgumentError('markIdle');
  if (!Number.isInteger(reply) || reply < 0) throw new UnexpectedScriptReplyError('markIdle', reply);
  return reply;
}

export function wakeIfIdleCall(keys: AccountKeys, earliestDueMs: number): ScriptCall {
  if (!Number.isFinite(earliestDueMs)) throw new InvalidStoreInputError('wakeIfIdle', 'earliestDueMs', `${earliestDueMs} must be a number`);
  return { name: 'wakeIfIdle', keys: [keys.idle], args: [String(Math.round(earliestDueMs))] };
}

/** True: the scheduler sleeps past the due time written; the caller wakes it. */
export function parseWakeIfIdleReply(reply: unknown): boolean {
  return expectCode('wakeIfIdle', reply, [1, 0]) === 1;
}
