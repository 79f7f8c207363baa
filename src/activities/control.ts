/**
 * Activities of the `polling-control` task queue: the claim round of a carrier account, claim
 * release for children that could not start, request-checks, the mode switch and the list of
 * accounts to schedule.
 */
import { Context } from '@temporalio/activity';
import type { Pool } from '../db/pool.js';
import { listCarriers } from '../db/carriers.js';
import type { CarrierQueueStore } from '../redis/carrierQueueStore.js';
import type { RedisRateLimiter } from '../ratelimit/limiter.js';
import type { ClaimRoundInput, ClaimRoundResult, ClaimedCard, GroupBudgetView, PollingMode, RequestCheckInput, RequestCheckResult } from '../common/orchestration.js';
import type { ReferenceData } from './referenceData.js';
import type { ActivityMetrics } from './metrics.js';

/** Request-check and mode switch live in services shared with the API; activities only call them. */
export interface RequestChecker {
  requestCheck(carrierId: string, request: RequestCheckInput): Promise<RequestCheckResult>;
}

export interface ModeSwitcher {
  switchMode(mode: PollingMode, actor: string, heartbeat: () => void): Promise<{ changed: boolean }>;
}

export interface ControlActivityDeps {
  readonly pool: Pool;
  readonly store: CarrierQueueStore;
  readonly limiter: RedisRateLimiter;
  readonly reference: ReferenceData;
  readonly requests: RequestChecker;
  readonly modes: ModeSwitcher;
  readonly metrics?: ActivityMetrics;
  /**
   * Upper bound on claims in flight per account from this deployment's card capacity (workers ×
   * slots). The running set includes cards whose workflow has not started yet, so a backlog on
   * the card task queue shrinks what the next round may claim.
   */
  readonly cardCapacity?: number;
}

/** Upper bound on how many seconds of budget one late round may plan for. */
const MAX_ROUND_BUDGET_SECONDS = 3;

export function createControlActivities(deps: ControlActivityDeps) {
  return {
    async claimRound(input: ClaimRoundInput): Promise<ClaimRoundResult> {
      if (input.refreshConfig) deps.reference.invalidate();
      const carrier = await deps.reference.carrier(input.carrierId, input.refreshConfig);
      if (!carrier) return { kind: 'stop', reason: 'carrier_missing' };
      if (!carrier.enabled) return { kind: 'stop', reason: 'carrier_disabled' };
      if ((await deps.reference.pollingMode()) === 'legacy') return { kind: 'idle', reason: 'legacy_mode' };
      const groupNames = carrier.groups.map((g) => g.name);
      const [remaining, rates] = await Promise.all([
        deps.limiter.remaining(input.carrierId, groupNames),
        Promise.all(groupNames.map((name) => deps.limiter.effectiveRate(input.carrierId, name))),
      ]);
      const inflightLimit = Math.min(carrier.inflightLimit, deps.cardCapacity ?? Number.POSITIVE_INFINITY);
      // A late round plans for the seconds it covers (capped), so slow ticks do not waste budget.
      const scale = Math.min(Math.max((input.sinceLastRoundMs ?? 1000) / 1000, 1), MAX_ROUND_BUDGET_SECONDS);
      const budget = Object.fromEntries(Object.entries(remaining).map(([group, left]) => [group, Math.floor(left * scale)]));
      const result = await deps.store.claim({
        carrierId: input.carrierId,
        leaseMs: carrier.leaseMs,
        inflightLimit,
        priorityRatio: carrier.priorityRatio,
        tokenPrefix: input.tokenPrefix,
        groupBudget: budget,
        typeGroups: { ...carrier.typeGroups },
        countRealname: carrier.realnameControl,
      });
      const depths = await deps.store.depths(input.carrierId);
      const groups: GroupBudgetView[] = carrier.groups.map((g, i) => ({
        name: g.name,
        qpsConfigured: g.qps,
        qpsEffective: rates[i] ?? g.qps,
        remaining: remaining[g.name] ?? 0,
      }));
      deps.metrics?.claimRound(input.carrierId, result.claimed.length, result.expired, depths.running, depths);
      return {
        kind: 'claimed',
        claimed: result.claimed.map((c): ClaimedCard => ({ cardId: c.cardId, token: c.token, fromPriority: c.fromPriority })),
        expired: result.expired,
        running: depths.running,
        lanes: { priority: depths.priority, normal: depths.normal },
        groups,
        cardRunTimeoutMs: carrier.totalTimeoutMs + carrier.leaseMs,
      };
    },

    async releaseClaims(input: { carrierId: string; cards: readonly ClaimedCard[] }): Promise<number> {
      let released = 0;
      for (const card of input.cards) if (await deps.store.release(input.carrierId, card.cardId, card.token)) released += 1;
      return released;
    },

    async requestCheck(input: { carrierId: string; request: RequestCheckInput }): Promise<RequestCheckResult> {
      return deps.requests.requestCheck(input.carrierId, input.request);
    },

    async readMode(): Promise<PollingMode> {
      return deps.reference.pollingMode(true);
    },

    async switchMode(input: { mode: PollingMode; actor: string }): Promise<{ changed: boolean }> {
      const result = await deps.modes.switchMode(input.mode, input.actor, () => Context.current().heartbeat());
      deps.reference.invalidate();
      return result;
    },

    async listEnabledCarriers(): Promise<string[]> {
      return (await listCarriers(deps.pool, { enabledOnly: true })).map((c) => c.id);
    },
  };
}

export type ControlActivities = ReturnType<typeof createControlActivities>;
