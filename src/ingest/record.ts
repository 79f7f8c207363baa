/**
 * The durable record of one card execution (docs/design.md, 'PostgreSQL and records'): everything
 * PostgreSQL learns from it — observations, the execution row, failure alerts opened or recovered,
 * the priority item's transition. Written by the card worker itself (sync ingest) or handed to the
 * ingest stream and written in batches (async ingest); both paths derive the same rows from it
 * (src/ingest/rows.ts).
 */
import type { ExecutionOutcome, FinishInput, StepResult } from '../workflow-safe/cardRun.js';
import type { TypeFinish } from '../domain/finishPlan.js';

export interface RecordExecutionInput extends Omit<FinishInput, 'results'> {
  readonly results: readonly StepResult[];
  readonly outcome: ExecutionOutcome;
  readonly owned: boolean;
  readonly typeFinishes: readonly TypeFinish[];
}

export interface IngestRecord extends RecordExecutionInput {
  /**
   * Unique per execution (workflow id + run id + card id: a batch run executes many cards):
   * redelivery and retries land on the same rows, and a dead letter is one row per execution.
   */
  readonly recordId: string;
  /** When the execution finished (epoch ms): the execution row's end and the alerts' time. */
  readonly finishedAt: number;
}

export function recordIdOf(input: Pick<FinishInput, 'workflowId' | 'runId' | 'cardId'>): string {
  return `${input.workflowId}/${input.runId}/${input.cardId}`;
}

export function toIngestRecord(input: RecordExecutionInput, finishedAt: number): IngestRecord {
  return { ...input, recordId: recordIdOf(input), finishedAt };
}

/** A stream entry's payload back to a record; throws when it cannot be one (dead-lettered). */
export function parseIngestRecord(json: string): IngestRecord {
  const value: unknown = JSON.parse(json);
  if (typeof value !== 'object' || value === null) throw new TypeError('record is not an object');
  const record = value as Partial<IngestRecord>;
  if (typeof record.recordId !== 'string' || typeof record.cardId !== 'string' || typeof record.carrierId !== 'string') {
    throw new TypeError('record lacks recordId, cardId or carrierId');
  }
  if (typeof record.finishedAt !== 'number' || !Array.isArray(record.results) || !Array.isArray(record.typeFinishes) || typeof record.plan !== 'object') {
    throw new TypeError('record lacks finishedAt, results, typeFinishes or plan');
  }
  return value as IngestRecord;
}
