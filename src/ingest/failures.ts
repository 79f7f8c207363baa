/**
 * Which write failures a retry can cure. Only errors that say "this data can never be written"
 * are permanent: integrity violations other than the duplicates ON CONFLICT absorbs (class 23),
 * invalid data (class 22) and our own validation. Everything else — the database away, restarting
 * (57P01..57P03), deadlocks (40P01), serialization failures, timeouts, too many connections,
 * network errors, and anything unrecognised — is retried: a record is never dropped on a guess.
 */
import { isDomainError } from '../domain/errors.js';
import { sqlState } from '../db/errors.js';

export type FailureKind = 'retryable' | 'permanent';

const PERMANENT_SQLSTATE_CLASSES = new Set(['22', '23']);

export function classifyWriteFailure(error: unknown): FailureKind {
  if (isDomainError(error)) return 'permanent';
  const state = sqlState(error);
  if (state && PERMANENT_SQLSTATE_CLASSES.has(state.slice(0, 2))) return 'permanent';
  return 'retryable';
}

/**
 * 23503: a row the write references does not exist. In a record that is its card, deleted after
 * the run prepared; sync ingest checks that the card is gone before ending the record as done
 * (src/activities/ingest.ts), the async ingest dead-letters it as permanent.
 */
export function isForeignKeyViolation(error: unknown): boolean {
  return sqlState(error) === '23503';
}

/** Exponential backoff with jitter, capped; attempt 1 is the first retry. */
export function backoffMs(attempt: number, options: { baseMs?: number; maxMs?: number; random?: () => number } = {}): number {
  const base = options.baseMs ?? 200;
  const max = options.maxMs ?? 5000;
  const ceiling = Math.min(max, base * 2 ** Math.min(attempt - 1, 20));
  return Math.round(ceiling / 2 + (options.random ?? Math.random)() * (ceiling / 2));
}
