/**
 * Activities of the `polling-gateway` task queue: one gateway call per activity, behind the shared
 * rate limiter. Classified outcomes are returned as values so the workflow decides what they mean;
 * only a transient failure is thrown (retryable), so Temporal's retry policy applies to it alone.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { GatewayClient } from '../gateway/client.js';
import { callThroughLimiter } from '../gateway/limitedCall.js';
import { GatewayError } from '../gateway/errors.js';
import type { RedisRateLimiter } from '../ratelimit/limiter.js';
import type { CarrierQueueStore } from '../redis/carrierQueueStore.js';
import type { GatewayStepInput, StepResult } from '../workflow-safe/cardRun.js';
import type { ActivityMetrics } from '../runtime/metrics.js';

export interface GatewayActivityDeps {
  readonly client: GatewayClient;
  readonly limiter: RedisRateLimiter;
  readonly store: CarrierQueueStore;
  readonly metrics?: ActivityMetrics;
}

export function createGatewayActivities(deps: GatewayActivityDeps) {
  return {
    async checkGateway(input: GatewayStepInput): Promise<StepResult | 'lease_lost'> {
      // Keep the lease alive, and stop before the call when it is no longer ours.
      if (!(await deps.store.renew(input.carrierId, input.cardId, input.token, input.executorId, input.leaseMs))) return 'lease_lost';
      const started = Date.now();
      const signal = safeCancellationSignal();
      try {
        // A type without a rate-limit group is not budgeted on this account: no limiter in front.
        const outcome =
          input.group === undefined
            ? {
                outcome: 'ok' as const,
                result: await deps.client.check(
                  input.type,
                  { account: input.gatewayAccount, iccid: input.iccid },
                  { deadline: input.deadlineMs, ...(signal ? { signal } : {}) },
                ),
                waitedMs: 0,
              }
            : await callThroughLimiter(deps, {
                carrierId: input.carrierId,
                group: input.group,
                type: input.type,
                account: input.gatewayAccount,
                iccid: input.iccid,
                deadline: input.deadlineMs,
                ...(signal ? { signal } : {}),
              });
        if (outcome.outcome === 'deferred') {
          deps.metrics?.deferral(input.carrierId, input.type, 'rate_limit_wait');
          return { type: input.type, outcome: 'deferred', reason: 'rate_limit_wait', gatewayMs: Date.now() - started };
        }
        deps.metrics?.gatewayCall(input.carrierId, input.group ?? '', input.type, 'success', outcome.result.latencyMs);
        return {
          type: input.type,
          outcome: 'success',
          gatewayMs: Math.round(outcome.result.latencyMs),
          observation: {
            collectionId: outcome.result.collectionId,
            observedAt: new Date(outcome.result.observedAtMs).toISOString(),
            payload: { ...outcome.result.observation },
            ...(outcome.result.changedAtMs === undefined ? {} : { changedAt: new Date(outcome.result.changedAtMs).toISOString() }),
          },
        };
      } catch (error) {
        if (!(error instanceof GatewayError)) throw error;
        deps.metrics?.gatewayCall(input.carrierId, input.group ?? '', input.type, error.errorClass, Date.now() - started);
        if (error.errorClass === 'rate_limited') {
          // The carrier pushed back: the limiter already slowed the group; the card is simply re-due.
          deps.metrics?.deferral(input.carrierId, input.type, 'carrier_rate_limited');
          return { type: input.type, outcome: 'deferred', reason: 'carrier_rate_limited', gatewayMs: Date.now() - started };
        }
        if (error.errorClass === 'transient' && Date.now() < input.deadlineMs - 100) {
          throw ApplicationFailure.retryable(error.message, 'transient', { reason: error.reason });
        }
        return {
          type: input.type,
          outcome: 'failure',
          errorClass: error.errorClass,
          message: `${error.reason}: ${error.message}`.slice(0, 500),
          gatewayMs: Date.now() - started,
        };
      }
    },
  };
}

export type GatewayActivities = ReturnType<typeof createGatewayActivities>;

/** The activity's cancellation signal, or none when called outside an activity (unit tests). */
function safeCancellationSignal(): AbortSignal | undefined {
  try {
    return Context.current().cancellationSignal;
  } catch {
    return undefined;
  }
}
