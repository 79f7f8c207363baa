/**
 * One gateway call behind the shared limiter: wait for a slot (up to the step's deadline), call,
 * and on the carrier's `rate_limited` slow the group down for every process (carrier pushback).
 * The limit holds at arrival: a call that cannot be sent within its slot (it waited for a free
 * socket, or woke late) gives the slot back and waits for a new one, instead of arriving in a
 * window that other grants already fill.
 */
import type { GatewayCheckType } from '../workflow-safe/checkTypes.js';
import type { RedisRateLimiter } from '../ratelimit/limiter.js';
import type { GatewayClient, GatewayObservation } from './client.js';
import { GatewayError } from './errors.js';

const DEFAULT_CALL_RESERVE_MS = 1000;

export interface LimitedCallRequest<T extends GatewayCheckType> {
  readonly carrierId: string;
  /** Rate-limit group of `type` on this account. */
  readonly group: string;
  readonly type: T;
  /** The account as the gateway knows it (carrier account's gateway id). */
  readonly account: string;
  readonly iccid: string;
  /** End of the step (epoch ms): bounds both the wait for a slot and the call. */
  readonly deadline: number;
  /**
   * Time kept for the call itself: the wait for a slot ends this long before the deadline, so a
   * late slot does not become a certain timeout. @default 1000
   */
  readonly callReserveMs?: number;
  readonly signal?: AbortSignal;
}

export type LimitedCallResult<T extends GatewayCheckType> =
  | { readonly outcome: 'ok'; readonly result: GatewayObservation<T>; readonly waitedMs: number }
  | { readonly outcome: 'deferred'; readonly waitedMs: number; readonly nextSlotInMs: number };

/** Throws {@link GatewayError} when the call fails; a deferral is a result, not an error. */
export async function callThroughLimiter<T extends GatewayCheckType>(
  deps: { readonly client: GatewayClient; readonly limiter: RedisRateLimiter },
  request: LimitedCallRequest<T>,
): Promise<LimitedCallResult<T>> {
  const started = Date.now();
  for (;;) {
    const granted = await deps.limiter.acquire(request.carrierId, request.group, {
      deadline: request.deadline - (request.callReserveMs ?? DEFAULT_CALL_RESERVE_MS),
      ...(request.signal ? { signal: request.signal } : {}),
    });
    if (granted.outcome === 'deferred') return { ...granted, waitedMs: Date.now() - started };
    const { slot } = granted;
    try {
      const result = await deps.client.check(
        request.type,
        { account: request.account, iccid: request.iccid },
        {
          deadline: request.deadline,
          ...(request.signal ? { signal: request.signal } : {}),
          sendBy: slot.sendBy,
          onSend: (at) => deps.limiter.sent(slot, at),
        },
      );
      return { outcome: 'ok', result, waitedMs: result.sentAtMs - started };
    } catch (error) {
      if (error instanceof GatewayError && error.reason === 'send_window_missed') {
        // Never sent: free the slot and queue again (a deferral if no slot comes in time).
        await deps.limiter.giveBack(slot);
        continue;
      }
      if (error instanceof GatewayError && error.errorClass === 'rate_limited') {
        await deps.limiter.reportRateLimited(request.carrierId, request.group, error.retryAfterMs);
      }
      throw error;
    }
  }
}
