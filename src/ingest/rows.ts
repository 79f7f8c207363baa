/**
 * The PostgreSQL rows one execution record stands for. Sync and async ingest both write exactly
 * these, so switching the mode changes when rows land, never which.
 */
import type { CheckType } from '../workflow-safe/checkTypes.js';
import type { ExecutionOutcome } from '../workflow-safe/cardRun.js';
import type { ObservationRow } from '../db/observations.js';
import type { Execution, ExecutionOutcome as StoredOutcome } from '../db/executions.js';
import type { IngestRecord } from './record.js';
import type { ChangeRow } from '../db/cardChanges.js';

const STORED_OUTCOME: Record<ExecutionOutcome, StoredOutcome> = {
  success: 'success',
  partial: 'partial',
  failure: 'failed',
  deferred: 'deferred',
  lost: 'aborted',
  not_polled: 'aborted',
  lease_lost: 'aborted',
  unprepared: 'aborted',
};

export interface FailureRow {
  readonly cardId: string;
  readonly carrierId: string;
  readonly type: CheckType;
  readonly failCount: number;
  readonly error: string;
  readonly at: Date;
  /** The failing execution's start: a later execution that succeeded for the type supersedes it. */
  readonly startedAt: Date;
  /** Start of the card's failure streak for the type. */
  readonly firstFailedAt?: Date;
}

export interface RecoveryRow {
  readonly cardId: string;
  readonly type: CheckType;
  /** Only alerts opened before the success are recovered (a late, older success recovers nothing newer). */
  readonly at: Date;
}

export interface RecordRows {
  readonly observations: ObservationRow[];
  /** The observations that carried the carrier's date of their state (card_change). */
  readonly changes: ChangeRow[];
  readonly execution: Execution;
  readonly recoveries: RecoveryRow[];
  readonly failures: FailureRow[];
}

export function rowsOf(record: IngestRecord): RecordRows {
  const finishedAt = new Date(record.finishedAt);
  const startedAt = new Date(record.startedAt);
  const observations: ObservationRow[] = [];
  const changes: ChangeRow[] = [];
  for (const result of record.results) {
    if (result.outcome !== 'success' || !result.observation) continue;
    const changedAt = result.observation.changedAt === undefined ? Number.NaN : Date.parse(result.observation.changedAt);
    if (!Number.isNaN(changedAt)) {
      changes.push({
        cardId: record.cardId,
        carrierId: record.carrierId,
        type: result.type,
        changedAt: new Date(changedAt),
        learnedAt: new Date(result.observation.observedAt),
      });
    }
    observations.push({
      observationId: result.observation.collectionId,
      cardId: record.cardId,
      carrierId: record.carrierId,
      type: result.type,
      observedAt: new Date(result.observation.observedAt),
      payload: result.observation.payload,
    });
  }
  const gatewayMs = record.results.reduce((sum, r) => sum + ('gatewayMs' in r ? r.gatewayMs : 0), 0);
  const execution: Execution = {
    cardId: record.cardId,
    carrierId: record.carrierId,
    startedAt,
    // A clock step between start and finish must not make the row invalid.
    finishedAt: finishedAt < startedAt ? startedAt : finishedAt,
    types: record.plan.types,
    outcome: STORED_OUTCOME[record.outcome],
    gatewayMs,
    workflowId: record.workflowId,
    runId: record.runId,
    fromPriority: record.fromPriority,
    details: {
      latenessMs: Math.max(0, record.startedAt - record.plan.earliestDue),
      owned: record.owned,
      steps: record.results.map((r) => ({
        type: r.type,
        outcome: r.outcome,
        // Which observation row a successful step made (a card's history traced step by step).
        ...(r.outcome === 'success' && r.observation ? { observationId: r.observation.collectionId } : {}),
        ...('errorClass' in r ? { errorClass: r.errorClass, message: r.message } : {}),
        ...('reason' in r ? { reason: r.reason } : {}),
      })),
      confirmations: record.typeFinishes.filter((t) => t.confirmed || t.confirmationMissed).map((t) => ({ type: t.type, reached: t.confirmed })),
    },
  };
  // Recover only what may be open: a type that had a failure streak before this success.
  const recoveries = record.typeFinishes
    .filter((t) => t.outcome === 'success' && t.failBefore > 0)
    .map((t) => ({ cardId: record.cardId, type: t.type, at: finishedAt }));
  const failures: FailureRow[] = [];
  for (const type of record.typeFinishes) {
    if (type.outcome !== 'failure') continue;
    const result = record.results.find((r) => r.type === type.type);
    const error = result?.outcome === 'failure' ? `${result.errorClass}|${result.message}` : 'unknown';
    // (Records handed over before the streak start was kept have no firstFailedAt.)
    const firstFailedAt = type.firstFailedAt ?? null;
    failures.push({
      cardId: record.cardId,
      carrierId: record.carrierId,
      type: type.type,
      failCount: type.failAfter,
      error,
      at: finishedAt,
      startedAt,
      ...(firstFailedAt === null ? {} : { firstFailedAt: new Date(firstFailedAt) }),
    });
  }
  return { observations, changes, execution, recoveries, failures };
}
