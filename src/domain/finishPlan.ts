/**
 * What finishing an execution writes into the card's due hash (docs/design.md, 'Finish rules'):
 * next due per type keeping the card's phase, failure streaks with jittered backoff, rate-limit
 * deferrals, delayed confirmation. Pure: inputs in, field changes out, so every rule is unit-tested
 * directly. Also the finish record: the result stored with the Redis finish so that a retry replays
 * it.
 */
import { CHECK_TYPES, isCheckType, type CheckType } from '../workflow-safe/checkTypes.js';
import type { ExecutionOutcome, StepResult } from '../workflow-safe/cardRun.js';
import { backoffDelay, confirmationStep, deferralDelay, nextDueAfterSuccess } from '../workflow-safe/schedule.js';
import { DueField } from '../redis/dueFields.js';
import { formatConfirmDelays, type DueState } from '../redis/dueState.js';

export interface FinishPlanInput {
  readonly state: DueState | null;
  readonly results: readonly StepResult[];
  /** Interval per polled type (ms); a type without one is no longer polled. */
  readonly intervalsMs: Partial<Record<CheckType, number>>;
  readonly backoffBaseMs: number;
  readonly now: number;
  readonly random: () => number;
}

export interface TypeFinish {
  readonly type: CheckType;
  readonly outcome: StepResult['outcome'];
  /** Consecutive failures before and after this execution. */
  readonly failBefore: number;
  readonly failAfter: number;
  /** Start of the failure streak (ms) after this execution; null when there is none. */
  readonly firstFailedAt: number | null;
  readonly nextDue: number | null;
  /** Delayed confirmation ended without seeing the expected state. */
  readonly confirmationMissed: boolean;
  readonly confirmed: boolean;
}

export interface FinishPlan {
  readonly set: Record<string, string | number>;
  readonly del: string[];
  readonly types: readonly TypeFinish[];
  readonly outcome: ExecutionOutcome;
}

/** The state a confirmation compares with `expected`, per type. */
export function observedState(result: StepResult): string | undefined {
  if (result.outcome !== 'success' || !result.observation) return undefined;
  const payload = result.observation.payload;
  if (result.type === 'card_status' && typeof payload.network === 'string') return payload.network;
  if (result.type === 'realname' && typeof payload.realname === 'string') return payload.realname;
  if (result.type === 'package' && typeof payload.state === 'string') return payload.state;
  return undefined;
}

export function planFinish(input: FinishPlanInput): FinishPlan {
  const set: Record<string, string | number> = {};
  const del: string[] = [];
  const types: TypeFinish[] = [];
  const { now } = input;
  for (const result of input.results) {
    const type = result.type;
    const previous = input.state?.types[type];
    const failBefore = previous?.fail ?? 0;
    const interval = input.intervalsMs[type];
    let nextDue: number | null = null;
    let failAfter = failBefore;
    let firstFailedAt: number | null = failBefore > 0 ? (previous?.ffail ?? null) : null;
    let confirmationMissed = false;
    let confirmed = false;
    switch (result.outcome) {
      case 'success': {
        set[DueField.ok(type)] = now;
        del.push(DueField.fail(type), DueField.firstFail(type), DueField.error(type));
        failAfter = 0;
        firstFailedAt = null;
        const expected = previous?.exp ?? null;
        const regular = interval === undefined ? null : nextDueAfterSuccess(previous?.due ?? undefined, interval, now);
        if (expected !== null) {
          const step = confirmationStep({ delaysSec: previous?.cfm ?? [], expected }, observedState(result));
          if (step.kind === 'again') {
            nextDue = now + step.delayMs;
            if (step.remaining.length > 0) set[DueField.confirm(type)] = formatConfirmDelays(step.remaining);
            else del.push(DueField.confirm(type));
          } else {
            del.push(DueField.confirm(type), DueField.expected(type));
            nextDue = regular;
            confirmed = step.kind === 'confirmed';
            confirmationMissed = step.kind === 'exhausted';
          }
        } else {
          nextDue = regular;
        }
        break;
      }
      case 'failure': {
        failAfter = failBefore + 1;
        set[DueField.fail(type)] = failAfter;
        if (failBefore === 0 || previous?.ffail == null) {
          firstFailedAt = now;
          set[DueField.firstFail(type)] = now;
        } else {
          firstFailedAt = previous.ffail;
        }
        set[DueField.error(type)] = `${result.errorClass}|${result.message}`.slice(0, 600);
        if (interval !== undefined) nextDue = now + backoffDelay(failAfter, { baseMs: input.backoffBaseMs, capMs: interval }, input.random);
        break;
      }
      case 'deferred':
        // Not the card's fault: due again shortly, no failure counted.
        if (interval !== undefined) nextDue = now + deferralDelay(input.random);
        break;
      case 'skipped':
        // Left due as it is: the card is claimed again at once for what it did not run.
        nextDue = previous?.due ?? null;
        break;
    }
    // Not polled any more (the plan's intervals): its due goes, with any pending request for it.
    if (interval === undefined) del.push(DueField.due(type), DueField.request(type));
    else if (result.outcome !== 'skipped' && nextDue !== null) set[DueField.due(type)] = nextDue;
    types.push({
      type,
      outcome: result.outcome,
      failBefore,
      failAfter,
      firstFailedAt,
      nextDue: interval === undefined ? null : nextDue,
      confirmationMissed,
      confirmed,
    });
  }
  // A due left for a type the card is no longer polled for (a config change the rebuild has not
  // brought to this card yet): nothing runs it, so it would keep the card due every round. The
  // execution's intervals are newer than the hash unless an upsert landed during the claim, and
  // then finish.lua keeps the upsert's dues (docs/design.md, "Lua scripts (`lua/`)": finish).
  const ran = new Set(input.results.map((result) => result.type));
  for (const type of CHECK_TYPES) {
    if (ran.has(type) || input.intervalsMs[type] !== undefined || input.state?.types[type].due == null) continue;
    del.push(DueField.due(type), DueField.request(type));
  }
  return { set, del, types, outcome: overallOutcome(input.results) };
}

export function overallOutcome(results: readonly StepResult[]): ExecutionOutcome {
  const ran = results.filter((r) => r.outcome !== 'skipped');
  if (ran.length === 0) return 'deferred';
  const successes = ran.filter((r) => r.outcome === 'success').length;
  const failures = ran.filter((r) => r.outcome === 'failure').length;
  if (failures === 0 && successes === ran.length) return 'success';
  if (successes === 0 && failures === 0) return 'deferred';
  if (successes === 0) return 'failure';
  return 'partial';
}

/**
 * What a finish returned, stored with the Redis finish (finish.lua) so that a retried finish gets
 * the first attempt's result instead of recomputing it from the hash that attempt already updated.
 */
export interface FinishRecord {
  readonly outcome: ExecutionOutcome;
  readonly types: readonly TypeFinish[];
  /** The execution's local package evaluation, when it ran (a re-evaluation would differ). */
  readonly evaluated?: StepResult;
  /** What the run's record needs beyond the finish: its replay after a crash writes it from here (FinishedRun). */
  readonly run?: FinishedRun;
}

/**
 * The part of a run's record that lives only in its worker until its workflow task completes: the
 * steps' results (what the gateway answered) and the plan's fields the record is written from.
 * Kept with the finish so that a run whose worker died after the finish landed, before the task
 * completed, still records what its check learned when it is replayed (docs/design.md, 'cardCheck').
 */
export interface FinishedRun {
  /** The run's id (its executor: the run id, or `<run id>/<card id>` in a batch). */
  readonly runId: string;
  readonly startedAt: number;
  readonly types: readonly CheckType[];
  readonly earliestDue: number;
  readonly priorityItemId?: string;
  readonly results: readonly StepResult[];
}

type TypeFinishTuple = [
  type: CheckType,
  outcome: StepResult['outcome'],
  failBefore: number,
  failAfter: number,
  nextDue: number | null,
  flags: number,
  firstFailedAt: number | null,
];

const CONFIRMED = 1;
const CONFIRMATION_MISSED = 2;
const STEP_OUTCOMES: readonly string[] = ['success', 'failure', 'deferred', 'skipped'] satisfies StepResult['outcome'][];
const EXECUTION_OUTCOMES: readonly string[] = ['success', 'partial', 'failure', 'deferred', 'lost', 'not_polled', 'lease_lost'] satisfies ExecutionOutcome[];

/** Compact JSON (it stays in Redis for an hour per card): one tuple per type. */
export function encodeFinishRecord(record: FinishRecord): string {
  const types = record.types.map((t): TypeFinishTuple => [
    t.type,
    t.outcome,
    t.failBefore,
    t.failAfter,
    t.nextDue,
    (t.confirmed ? CONFIRMED : 0) | (t.confirmationMissed ? CONFIRMATION_MISSED : 0),
    t.firstFailedAt,
  ]);
  return JSON.stringify({ o: record.outcome, t: types, ...(record.evaluated ? { p: record.evaluated } : {}), ...(record.run ? { r: record.run } : {}) });
}

export class FinishRecordError extends Error {
  constructor(raw: string) {
    super(`malformed finish record: ${raw.slice(0, 200)}`);
    this.name = 'FinishRecordError';
  }
}

function isRecordObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const isCount = (value: unknown): value is number => typeof value === 'number' && Number.isInteger(value) && value >= 0;

function decodeType(value: unknown, raw: string): TypeFinish {
  if (!Array.isArray(value) || value.length !== 7) throw new FinishRecordError(raw);
  const [type, outcome, failBefore, failAfter, nextDue, flags, firstFailedAt] = value as unknown[];
  if (firstFailedAt !== null && typeof firstFailedAt !== 'number') throw new FinishRecordError(raw);
  if (!isCheckType(type) || typeof outcome !== 'string' || !STEP_OUTCOMES.includes(outcome)) throw new FinishRecordError(raw);
  if (!isCount(failBefore) || !isCount(failAfter) || !isCount(flags) || (nextDue !== null && typeof nextDue !== 'number')) throw new FinishRecordError(raw);
  return {
    type,
    outcome: outcome as StepResult['outcome'],
    failBefore,
    failAfter,
    firstFailedAt,
    nextDue,
    confirmed: (flags & CONFIRMED) !== 0,
    confirmationMissed: (flags & CONFIRMATION_MISSED) !== 0,
  };
}

export function decodeFinishRecord(raw: string): FinishRecord {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new FinishRecordError(raw);
  }
  if (!isRecordObject(parsed) || typeof parsed.o !== 'string' || !EXECUTION_OUTCOMES.includes(parsed.o) || !Array.isArray(parsed.t))
    throw new FinishRecordError(raw);
  const types = (parsed.t as unknown[]).map((t) => decodeType(t, raw));
  const evaluated = parsed.p;
  if (
    evaluated !== undefined &&
    !(isRecordObject(evaluated) && isCheckType(evaluated.type) && typeof evaluated.outcome === 'string' && STEP_OUTCOMES.includes(evaluated.outcome))
  )
    throw new FinishRecordError(raw);
  const run = parsed.r;
  if (
    run !== undefined &&
    !(
      isRecordObject(run) &&
      typeof run.runId === 'string' &&
      typeof run.startedAt === 'number' &&
      typeof run.earliestDue === 'number' &&
      Array.isArray(run.types) &&
      run.types.every(isCheckType) &&
      Array.isArray(run.results) &&
      (run.priorityItemId === undefined || typeof run.priorityItemId === 'string')
    )
  )
    throw new FinishRecordError(raw);
  // The evaluation and the run are our own, written by encodeFinishRecord: checked as far as their kind.
  return {
    outcome: parsed.o as ExecutionOutcome,
    types,
    ...(evaluated === undefined ? {} : { evaluated: evaluated as StepResult }),
    ...(run === undefined ? {} : { run: run as unknown as FinishedRun }),
  };
}
