/**
 * "PostgreSQL cannot be reached" as opposed to "PostgreSQL answered no": the one class of failure
 * the hot path of polling may ride out on what it already knows (reference data served stale, a
 * card row remembered, a package evaluation deferred). Anything PostgreSQL itself reports about
 * the statement — a constraint, bad data, a missing table — is not this, and is thrown as before:
 * stale data must never hide a real error.
 */
import { sqlState } from '../db/errors.js';

/** Socket-level codes of a database that is down, restarting or cut off. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNABORTED']);

/**
 * SQLSTATEs of a server that is going away or not accepting work: connection exceptions (08xxx),
 * admin/crash shutdown and "cannot connect now" while starting (57P01..57P03), too many
 * connections (53300).
 */
function unreachableState(state: string): boolean {
  return state.startsWith('08') || state === '57P01' || state === '57P02' || state === '57P03' || state === '53300';
}

/** node-postgres' own wording when a connection dies or cannot be had (no code attached). */
const PG_CLIENT_MESSAGES = [
  /^Connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /Client has encountered a connection error/i,
  /Connection closed/i,
];

export function isDatabaseUnreachable(error: unknown, depth = 0): boolean {
  if (!(error instanceof Error) || depth > 4) return false;
  if (error instanceof AggregateError && error.errors.some((inner) => isDatabaseUnreachable(inner, depth + 1))) return true;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && NETWORK_CODES.has(code)) return true;
  const state = sqlState(error);
  if (state !== undefined) return unreachableState(state);
  if (PG_CLIENT_MESSAGES.some((pattern) => pattern.test(error.message))) return true;
  return error.cause !== undefined && isDatabaseUnreachable(error.cause, depth + 1);
}
