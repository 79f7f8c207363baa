/**
 * The one error type of the gateway client. Every failure (HTTP status, carrier error body,
 * network error, timeout, cancellation, malformed answer) becomes a GatewayError with exactly one
 * class, so callers decide retry/backoff/alert from `errorClass` alone.
 */
import type { GatewayErrorClass } from './contract.js';

/** What went wrong, finer than the class; for logs and metrics, not for control flow. */
export type GatewayErrorReason =
  | 'carrier' // the gateway answered with an error body
  | 'http_status' // a non-2xx status without a valid error body
  | 'network' // connection refused/reset, DNS …
  | 'timeout' // no complete answer within the call's time
  | 'aborted' // the caller's AbortSignal fired (activity cancelled)
  | 'send_window_missed' // not sent: no connection before the call's rate-limit slot ended
  | 'malformed'; // 2xx whose body does not match the contract

export class GatewayError extends Error {
  constructor(
    readonly errorClass: GatewayErrorClass,
    readonly reason: GatewayErrorReason,
    message: string,
    readonly retryAfterMs?: number,
    /** HTTP status when the gateway answered at all. */
    readonly status?: number,
    /** The carrier's machine-readable code, when it sent one. */
    readonly code?: string,
  ) {
    super(message);
    this.name = 'GatewayError';
  }
}
