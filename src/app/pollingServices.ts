/**
 * The polling services shared by activities and the API: request-check (durable priority item,
 * then the Redis request), the mode switch (rebuild under a lock, then persist), and the priority
 * item transitions an execution causes.
 */
import type { RuntimeDeps } from '../runtime/deps.js';
import { LifecycleService } from '../lifecycle/service.js';
import type { SchedulerWaker } from '../lifecycle/apply.js';
import { rebuild, RebuildLockedError } from '../lifecycle/rebuild.js';
import { getPollingMode, setPollingMode } from '../db/systemConfig.js';
import { writeAudit } from '../db/audit.js';
import {
  claimPriorityItem,
  completePriorityItem,
  failPendingPriorityItem,
  failPriorityItem,
  findActivePriorityItem,
  requestPriorityItem,
  schedulePriorityRetry,
  type FailInput,
} from '../db/priorityItems.js';
import { isDomainError } from '../domain/errors.js';
import { globalKeys } from '../redis/keys.js';
import type { ModeSwitcher, PriorityClaims, PriorityTransitions, RedisGuard, RequestChecker } from './ports.js';
import type { PollingMode } from '../workflow-safe/pollingMode.js';
import type { RequestCheckInput, RequestCheckResult, RequestedTypeStatus } from '../workflow-safe/requestCheck.js';
import type { StepResult } from '../workflow-safe/cardRun.js';
import type { CheckType } from '../workflow-safe/checkTypes.js';
import { findCards } from '../db/cards.js';
import { listCarriers } from '../db/carriers.js';

/** Error classes after which retrying a priority item cannot help: the same request would fail the same way. */
const FINAL_ERROR_CLASSES = new Set(['permanent', 'invalid_response']);
/** How soon a priority item whose attempt failed retryably runs again. */
const PRIORITY_RETRY_DELAY_MS = 5000;

export interface PollingServices {
  readonly lifecycle: LifecycleService;
  readonly requests: RequestChecker;
  readonly modes: ModeSwitcher;
  readonly redisGuard: RedisGuard;
  readonly priority: PriorityTransitions & PriorityClaims;
}

export function createPollingServices(input: { deps: RuntimeDeps; namespace?: string; wakeSchedulers?: SchedulerWaker }): PollingServices {
  const { deps } = input;
  const namespace = input.namespace ?? deps.config.REDIS_KEY_PREFIX;
  const { pool, store } = deps;
  // Claim loop activities read the idle mark every tick (SCHEDULER_LOOP=activity): a `wake` signal
  // would cost a Temporal action and a workflow task for nothing.
  const wakeSchedulers = deps.config.SCHEDULER_LOOP === 'activity' ? undefined : input.wakeSchedulers;
  const lifecycle = new LifecycleService({
    pool,
    store,
    redis: deps.redis,
    namespace,
    outboxGraceMs: deps.config.LIFECYCLE_OUTBOX_GRACE_MS,
    ...(wakeSchedulers ? { wakeSchedulers } : {}),
    log: (line) => deps.logger.warn({ component: 'lifecycle' }, line),
  });
  const marker = globalKeys(namespace).rebuiltMarker;
  /**
   * After a full rebuild every enabled account's scheduler is woken: a sleeping one's mark
   * (lua/markIdle.lua) went with the data a flush lost, so no write of the rebuild would wake it.
   */
  const wakeEveryScheduler = async (): Promise<void> => {
    const wake = wakeSchedulers;
    if (wake === undefined) return;
    const enabled = (await listCarriers(pool, { enabledOnly: true })).map((carrier) => carrier.id);
    void wake(enabled).catch(() => undefined);
  };

  const requests: RequestChecker = {
    async requestCheck(carrierId: string, request: RequestCheckInput): Promise<RequestCheckResult> {
      const lane = request.lane ?? 'priority';
      // Only types the card is polled for are requested: a due time for any other type would make
      // the card due every second with nothing to run (the capability is not configured for it).
      const [card] = await findCards(pool, [request.cardId]);
      const intervals = card ? (await deps.reference.intervals()).resolve(card) : {};
      const polledTypes = request.types.filter((type) => intervals[type] !== undefined);
      const notPolled = request.types.filter((type) => intervals[type] === undefined);
      const perType = (status: 'requested' | 'cooldown' | 'not_polled') =>
        Object.fromEntries(request.types.map((type) => [type, notPolled.includes(type) ? 'not_polled' : status])) as Partial<
          Record<CheckType, RequestedTypeStatus>
        >;
      // Nothing to run: an active item of the card stays as it is; otherwise the refusal is recorded as a failed item.
      if (card && polledTypes.length === 0 && (await findActivePriorityItem(pool, request.cardId))) {
        return { status: 'not_polled', requested: 0, types: perType('not_polled') };
      }
      let created: { id: string; merged: boolean };
      try {
        const { item, merged } = await requestPriorityItem(pool, {
          cardId: request.cardId,
          types: [...(polledTypes.length > 0 ? polledTypes : request.types)],
          lane,
          ...(request.cooldownMs === undefined ? {} : { cooldownMs: request.cooldownMs }),
          ...(request.confirmDelaysSec === undefined ? {} : { confirmDelaysSec: [...request.confirmDelaysSec] }),
          ...(request.expected === undefined ? {} : { expected: request.expected }),
          actor: request.actor ?? 'api',
          source: request.source ?? 'api',
        });
        created = { id: item.id, merged };
      } catch (error) {
        if (isDomainError(error) && error.code === 'not_found') return { status: 'not_polled', requested: 0, types: perType('not_polled') };
        throw error;
      }
      if (polledTypes.length === 0) {
        const reason = card ? `capability not configured: ${notPolled.join(', ')} not polled for this card` : 'card is not polled';
        await failPendingPriorityItem(pool, { itemId: created.id, reason, actor: request.actor ?? 'api', source: request.source ?? 'api' });
        return { status: 'not_polled', requested: 0, types: perType('not_polled') };
      }
      let result: Awaited<ReturnType<typeof store.requestCheck>>;
      try {
        result = await store.requestCheck({
          carrierId,
          cardId: request.cardId,
          cooldownMs: request.cooldownMs ?? 0,
          ...(request.confirmDelaysSec && request.confirmDelaysSec.length > 0 ? { confirmDelaysSec: [...request.confirmDelaysSec] } : {}),
          ...(request.expected === undefined ? {} : { expected: request.expected }),
          lane,
          types: polledTypes,
        });
      } catch (error) {
        // The item is durable but Redis did not get the request (Redis away): give the item a next
        // run, so the account's scheduler requests it again instead of leaving it pending forever.
        await schedulePriorityRetry(pool, created.id, new Date(Date.now() + PRIORITY_RETRY_DELAY_MS)).catch(() => undefined);
        throw error;
      }
      if (result.status === 'not_polled') {
        await failPendingPriorityItem(pool, {
          itemId: created.id,
          reason: 'card is not polled',
          actor: request.actor ?? 'api',
          source: request.source ?? 'api',
        });
        return { status: 'not_polled', requested: 0, types: perType('not_polled') };
      }
      // Everything asked for succeeded within the cooldown: a fresh item has nothing left to do.
      if (result.status === 'cooldown' && !created.merged) {
        await failPendingPriorityItem(pool, {
          itemId: created.id,
          reason: 'all requested types succeeded within the cooldown',
          actor: request.actor ?? 'api',
          source: request.source ?? 'api',
        });
      }
      return { status: result.status, requested: result.requested, types: perType(result.status) };
    },
  };

  const modes: ModeSwitcher = {
    async switchMode(mode: PollingMode, actor: string, heartbeat: () => void): Promise<{ changed: boolean }> {
      const before = await getPollingMode(pool);
      if (before.mode === mode) return { changed: false };
      heartbeat();
      // To carrier: Redis is rebuilt from PostgreSQL first, so claiming starts on complete lanes.
      if (mode === 'carrier') await rebuild({ pool, redis: deps.redis, store, namespace }, { ignoreMode: true, onProgress: heartbeat });
      heartbeat();
      const after = await setPollingMode(pool, mode, actor);
      // A card created or re-enabled between the rebuild's last page and the mode write reached
      // PostgreSQL only (lifecycle events in legacy mode skip Redis): a second, idempotent pass
      // picks it up. It keeps every due time the first pass wrote, so it is quick.
      if (mode === 'carrier') {
        await rebuild({ pool, redis: deps.redis, store, namespace }, { onProgress: heartbeat });
        heartbeat();
        await deps.redis.set(marker, new Date().toISOString());
        await wakeEveryScheduler();
      }
      await writeAudit(pool, {
        entityType: 'system_config',
        entityId: 'polling.mode',
        action: 'mode_switched',
        actor,
        source: 'pollingControl',
        before: { mode: before.mode },
        after: { mode: after.mode },
        occurredAt: after.updatedAt,
      });
      deps.reference.invalidate();
      return { changed: true };
    },
  };

  /**
   * An attempt that failed for now: the item back to pending with its next run. The account's loop
   * may be asleep past that run (lua/markIdle.lua bounds a sleep by the next retry, read when the
   * account went idle, which can be before this record landed: under load the priority retry then
   * waited out the whole idle sleep, 60 s), so a sleep past it is cut short, as a lifecycle write of
   * an earlier due does.
   */
  const retryLater = async (carrierId: string, attempt: Omit<FailInput, 'retryable' | 'nextRunAt'> & { readonly nextRunAt: Date }): Promise<void> => {
    const item = await failPriorityItem(pool, { ...attempt, retryable: true });
    if (item?.status !== 'pending') return;
    const asleep = await store.wakeIfIdle(new Map([[carrierId, attempt.nextRunAt.getTime()]])).catch(() => []);
    if (asleep.length > 0) void wakeSchedulers?.(asleep).catch(() => undefined);
  };

  const priority: PriorityTransitions & PriorityClaims = {
    async claimForExecution({ cardId, token, leaseMs }) {
      const claimed = await claimPriorityItem(pool, { cardId, token, leaseMs });
      return claimed.status === 'claimed' || claimed.status === 'taken_over' ? claimed.item.id : undefined;
    },
    async failForExecution({ itemId, token, reason }) {
      await failPriorityItem(pool, { itemId, token, reason, retryable: false });
    },
    async executionFinished(execution) {
      const itemId = execution.plan.priorityItemId;
      if (itemId === undefined) return;
      if (execution.outcome === 'lease_lost') {
        // Stopped before finishing: the next claim of the card runs the item again.
        await retryLater(execution.carrierId, { itemId, token: execution.token, reason: 'execution stopped: claim lease lost', nextRunAt: new Date() });
        return;
      }
      const failures = execution.results.filter((r): r is Extract<StepResult, { outcome: 'failure' }> => r.outcome === 'failure');
      const unfinished = execution.results.filter((r) => r.outcome === 'deferred' || r.outcome === 'skipped');
      const final = failures.find((f) => FINAL_ERROR_CLASSES.has(f.errorClass));
      if (final) {
        await failPriorityItem(pool, { itemId, token: execution.token, reason: `${final.type}: ${final.errorClass}|${final.message}`, retryable: false });
      } else if (failures.length > 0 || unfinished.length > 0) {
        const first = failures[0];
        const reason = first ? `${first.type}: ${first.errorClass}|${first.message}` : `${unfinished[0]?.type ?? 'check'} deferred`;
        await retryLater(execution.carrierId, { itemId, token: execution.token, reason, nextRunAt: new Date(Date.now() + PRIORITY_RETRY_DELAY_MS) });
      } else {
        await completePriorityItem(pool, { itemId, token: execution.token });
      }
    },
  };

  const redisGuard: RedisGuard = {
    async ensureIntact() {
      if ((await deps.redis.exists(marker)) === 1) return false;
      try {
        // Legacy mode skips (Redis is not used then); the switch back to carrier mode rebuilds anyway.
        const result = await rebuild({ pool, redis: deps.redis, store, namespace });
        if (result.skipped) return false;
        await deps.redis.set(marker, new Date().toISOString());
        await wakeEveryScheduler();
        return true;
      } catch (error) {
        // Another process is rebuilding right now: it writes the marker when done.
        if (error instanceof RebuildLockedError) return false;
        throw error;
      }
    },
  };

  return { lifecycle, requests, modes, priority, redisGuard };
}
