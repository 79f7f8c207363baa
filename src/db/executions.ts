/**
 * card_execution: one row per card execution — a cardCheck run, or one card of a cardBatch run
 * (rows of one batch share its workflow and run ids) — listed newest first in the card detail.
 */
import { isCheckType, type CheckType } from '../workflow-safe/checkTypes.js';
import { DomainError } from '../domain/errors.js';
import { requireId, requireText } from '../domain/validate.js';
import type { Queryable } from './queryable.js';

export const EXECUTION_OUTCOMES = ['success', 'partial', 'failed', 'deferred', 'aborted'] as const;
export type ExecutionOutcome = (typeof EXECUTION_OUTCOMES)[number];

export interface Execution {
  readonly cardId: string;
  readonly carrierId: string;
  readonly startedAt: Date;
  readonly finishedAt?: Date;
  readonly types: readonly CheckType[];
  readonly outcome: ExecutionOutcome;
  readonly gatewayMs: number;
  readonly workflowId: string;
  readonly runId: string;
  readonly fromPriority?: boolean;
  readonly details?: Readonly<Record<string, unknown>>;
}

export interface StoredExecution extends Execution {
  readonly id: string;
}

function validateExecution(execution: Execution): void {
  requireId(execution.cardId, 'cardId');
  requireId(execution.carrierId, 'carrierId');
  requireText(execution.workflowId, 'workflowId');
  requireText(execution.runId, 'runId');
  if (!execution.types.every(isCheckType)) throw DomainError.invalid('types', 'types must be check types');
  if (!(EXECUTION_OUTCOMES as readonly string[]).includes(execution.outcome)) throw DomainError.invalid('outcome', 'unknown outcome');
}

/**
 * Executions in one statement (sync ingest and the ingest's batches). Idempotent on (workflowId,
 * runId, cardId): a retried write lands nothing twice. Returns how many rows were new.
 */
export async function insertExecutions(db: Queryable, executions: readonly Execution[]): Promise<number> {
  if (executions.length === 0) return 0;
  executions.forEach(validateExecution);
  const result = await db.query(
    `INSERT INTO card_execution (card_id, carrier_id, started_at, finished_at, types, outcome, gateway_ms, workflow_id, run_id, from_priority, details)
     SELECT card_id, carrier_id, started_at, finished_at, ARRAY(SELECT jsonb_array_elements_text(types)), outcome, gateway_ms, workflow_id, run_id, from_priority, details
       FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::timestamptz[], $5::jsonb[], $6::text[], $7::int[], $8::text[], $9::text[], $10::boolean[], $11::jsonb[])
         AS e(card_id, carrier_id, started_at, finished_at, types, outcome, gateway_ms, workflow_id, run_id, from_priority, details)
     ON CONFLICT (workflow_id, run_id, card_id) DO NOTHING`,
    [
      executions.map((e) => e.cardId),
      executions.map((e) => e.carrierId),
      executions.map((e) => e.startedAt),
      executions.map((e) => e.finishedAt ?? null),
      // text[][] cannot be ragged: each run's types travel as one JSON array.
      executions.map((e) => JSON.stringify(e.types)),
      executions.map((e) => e.outcome),
      executions.map((e) => Math.max(0, Math.round(e.gatewayMs))),
      executions.map((e) => e.workflowId),
      executions.map((e) => e.runId),
      executions.map((e) => e.fromPriority ?? false),
      executions.map((e) => JSON.stringify(e.details ?? {})),
    ],
  );
  return result.rowCount ?? 0;
}

export async function listExecutions(db: Queryable, cardId: string, limit = 20): Promise<StoredExecution[]> {
  const { rows } = await db.query<Omit<StoredExecution, 'finishedAt'> & { finishedAt: Date | null }>(
    `SELECT id::text, card_id::text AS "cardId", carrier_id::text AS "carrierId", started_at AS "startedAt", finished_at AS "finishedAt",
            types, outcome, gateway_ms AS "gatewayMs", workflow_id AS "workflowId", run_id AS "runId", from_priority AS "fromPriority", details
       FROM card_execution WHERE card_id = $1::bigint ORDER BY started_at DESC, card_execution.id DESC LIMIT $2`,
    [requireId(cardId, 'cardId'), limit],
  );
  return rows.map(({ finishedAt, ...row }) => (finishedAt === null ? row : { ...row, finishedAt }));
}
