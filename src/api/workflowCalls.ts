/**
 * Calls into the running orchestration. A missing workflow (orchestration not started, account
 * scheduler stopped) is told apart from other failures: after a carrier change it is harmless
 * (nothing to notify), for a request-check or mode switch it means "unavailable" (503).
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { ApiError } from './errors.js';
import { SchedulerNotRunning } from '../app/requestCheckService.js';

/** gRPC NOT_FOUND, which some client calls surface without wrapping it. */
const GRPC_NOT_FOUND = 5;

export function isWorkflowMissing(error: unknown): boolean {
  if (error instanceof WorkflowNotFoundError || error instanceof SchedulerNotRunning) return true;
  const code = (error as { code?: unknown; cause?: { code?: unknown } } | null)?.code ?? (error as { cause?: { code?: unknown } } | null)?.cause?.code;
  return code === GRPC_NOT_FOUND;
}

/** Runs a notification; a missing workflow is fine (nothing running to tell). */
export async function notifyIfRunning(fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (error) {
    if (!isWorkflowMissing(error)) throw error;
  }
}

/** Runs a call that needs the workflow; a missing one becomes 503 naming what is not running. */
export async function requireRunning<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (isWorkflowMissing(error)) throw new ApiError(503, 'unavailable', `${what} is not running; start the orchestration (npm start) and retry`);
    throw error;
  }
}
