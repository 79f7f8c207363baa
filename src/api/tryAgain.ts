/**
 * Failures that mean "not done, and nothing wrong with the request: send it again shortly", which
 * the API answers 503 with `Retry-After` instead of 500: the scheduler refusing an update while it
 * continues as new (after the client's own retries ran out), an update or query the workflow did
 * not answer in time, the Temporal server unreachable or busy, PostgreSQL or Redis unreachable.
 */
import { ApplicationFailure, ServiceError, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError, isGrpcServiceError } from '@temporalio/client';
import { SCHEDULER_CONTINUING_AS_NEW } from '../workflow-safe/requestCheck.js';
import { GRPC_RETRYABLE_UPDATE_CODES } from '../app/temporalControl.js';
import { isDatabaseUnreachable } from '../runtime/databaseErrors.js';

export interface TryAgain {
  /** Seconds to wait, for `Retry-After`. */
  readonly afterSec: number;
  /** What is not available, for the answer (no internals). */
  readonly reason: string;
}

/** A scheduler's continue-as-new takes well under a second once it closes. */
const CONTINUE_AS_NEW_RETRY_SEC = 1;
const BUSY_RETRY_SEC = 5;

/**
 * ioredis gave up on a command: it retried `maxRetriesPerRequest` times while reconnecting
 * (src/redis/connect.ts), or the connection is closed for good.
 */
function isRedisUnreachable(error: unknown): boolean {
  return error instanceof Error && (error.name === 'MaxRetriesPerRequestError' || error.message === 'Connection is closed.');
}

function grpcCode(error: unknown): number | undefined {
  const grpc = error instanceof ServiceError ? error.cause : error;
  return isGrpcServiceError(grpc) ? Number(grpc.code) : undefined;
}

export function tryAgain(error: unknown): TryAgain | undefined {
  if (error instanceof WorkflowUpdateFailedError) {
    if (error.cause instanceof ApplicationFailure && error.cause.type === SCHEDULER_CONTINUING_AS_NEW) {
      return { afterSec: CONTINUE_AS_NEW_RETRY_SEC, reason: 'the scheduler is continuing as new and did not take the request' };
    }
    return undefined;
  }
  if (error instanceof WorkflowUpdateRPCTimeoutOrCancelledError) return { afterSec: BUSY_RETRY_SEC, reason: 'the workflow did not answer in time' };
  const code = grpcCode(error);
  if (code !== undefined && GRPC_RETRYABLE_UPDATE_CODES.has(code)) {
    return { afterSec: BUSY_RETRY_SEC, reason: `the orchestration (Temporal) is unreachable or busy (gRPC ${code})` };
  }
  if (isRedisUnreachable(error)) return { afterSec: BUSY_RETRY_SEC, reason: 'Redis is unreachable' };
  // Also socket-level codes (ECONNREFUSED …) of whichever connection: named for the usual case.
  if (isDatabaseUnreachable(error)) return { afterSec: BUSY_RETRY_SEC, reason: 'a store (PostgreSQL or Redis) is unreachable' };
  return undefined;
}
