/**
 * Account status: lanes, in-flight and due-now from Redis, per group the configured
 * and effective rate and calls in the last second, lateness over the last minute, staleness of the
 * changes learned over the last hour, expired leases
 * from the running scheduler, the capacity estimate, and how far Redis holds the account's cards
 * (a rebuild's progress).
 */
import { settleAll } from '../../runtime/settleAll.js';
import { getCarrier } from '../../db/carriers.js';
import { listPollingConfigs } from '../../db/pollingConfigs.js';
import { latenessPercentiles, polledCountsByStatus, type LatenessPercentiles } from '../../db/statusQueries.js';
import { getPollingMode } from '../../db/systemConfig.js';
import { stalenessByType, type Staleness } from '../../db/cardChanges.js';
import type { CheckType } from '../../workflow-safe/checkTypes.js';
import { IntervalResolver } from '../../domain/pollingConfig.js';
import type { OrchestrationView, SchedulerStatus } from '../../workflow-safe/loopStatus.js';
import { currentSchedulerStatus } from '../../app/temporalControl.js';
import { globalKeys } from '../../redis/keys.js';
import type { ApiContext } from '../context.js';
import { capacityOf, type Capacity } from './capacity.js';

/** Window of the lateness percentiles. */
export const LATENESS_WINDOW_MS = 60_000;
/** Window of the staleness percentiles: changes are rarer than checks (1 % of cards an hour, say). */
export const STALENESS_WINDOW_MS = 3_600_000;
const ONE_SECOND_MS = 1000;

export interface GroupStatus {
  readonly name: string;
  readonly qpsConfigured: number;
  readonly qpsEffective: number;
  readonly usedLastSecond: number;
}

export interface CarrierStatus {
  readonly carrierId: string;
  readonly mode: 'carrier' | 'legacy';
  readonly paused: boolean;
  /** Claims in flight. */
  readonly inflight: number;
  /** Polled cards per lane, the `inflight` ones included (a claimed card stays in its lane). */
  readonly lanes: { readonly priority: number; readonly normal: number };
  readonly dueNow: number;
  readonly groups: GroupStatus[];
  readonly latenessMs: LatenessPercentiles;
  /**
   * Per check type, from a change at the carrier (as its answers date it) to the first
   * observation that carried it, over the changes learned in the last hour; types whose answers
   * carry no date, or with no change, are absent.
   */
  readonly staleness: Partial<Record<CheckType, Staleness>>;
  readonly expiredLeases: number;
  readonly capacity: Capacity;
  /** What holds the account back now: `none` (keeping up), `budget`, `inflight` (its configured limit) or `orchestration` (the engine). */
  readonly limitedBy: OrchestrationView['limitedBy'] | 'unknown';
  /** The scheduler's view of the engine for this account; absent while its scheduler is not running. */
  readonly orchestration?: OrchestrationView;
  /** Whether the account's scheduler answered its status query. */
  readonly schedulerRunning: boolean;
  readonly rebuild: RebuildProgress;
}

/**
 * How far Redis holds the account's cards, i.e. a rebuild's progress. `running`: a rebuild holds
 * the rebuild lock now (accounts are rebuilt one after the other, in pages); `pending`: in carrier
 * mode Redis lacks the rebuilt marker (it lost its data), so the next pollingControl reconcile
 * rebuilds; `idle`: neither. `cardsDone` counts the cards in the account's lanes, `cardsTotal` those
 * PostgreSQL polls under it with at least one interval: after a loss of Redis data the first climbs
 * to the second as the rebuild writes its pages. A rebuild that only re-places cards Redis still
 * holds (after a polling-config change) is `running` with both equal.
 */
export interface RebuildProgress {
  readonly state: 'idle' | 'pending' | 'running';
  readonly cardsDone: number;
  readonly cardsTotal: number;
}

async function rebuildState(ctx: ApiContext, mode: 'carrier' | 'legacy'): Promise<RebuildProgress['state']> {
  const keys = globalKeys(ctx.config.REDIS_KEY_PREFIX);
  const [locked, marked] = await Promise.all([ctx.deps.redis.exists(keys.rebuildLock), ctx.deps.redis.exists(keys.rebuiltMarker)]);
  if (locked === 1) return 'running';
  // Legacy mode does not use Redis: the switch back to carrier mode rebuilds before claiming.
  return mode === 'carrier' && marked === 0 ? 'pending' : 'idle';
}

/** The scheduler's own view, or undefined when it is not running (orchestration down, account disabled). */
async function schedulerView(ctx: ApiContext, carrierId: string): Promise<SchedulerStatus | undefined> {
  try {
    return await currentSchedulerStatus(ctx.orchestration, ctx.deps.store, carrierId);
  } catch {
    return undefined;
  }
}

async function groupStatus(ctx: ApiContext, carrierId: string, name: string, qps: number, now: number): Promise<GroupStatus> {
  const { limiter, redis, store } = ctx.deps;
  // The limiter's window ZSET scores grants (and reservations) by time: count the last second's.
  const used = await redis.zcount(store.keys(carrierId).rateLimit(name), now - ONE_SECOND_MS, now);
  let effective = qps;
  try {
    effective = (await limiter.inspect(carrierId, name)).effectiveRate;
  } catch {
    // The limiter only runs integer rates ≥ 1; for other configured rates show the configuration.
  }
  return { name, qpsConfigured: qps, qpsEffective: effective, usedLastSecond: used };
}

export async function carrierStatus(ctx: ApiContext, carrierId: string): Promise<CarrierStatus> {
  const { pool, store } = ctx.deps;
  const carrier = await getCarrier(pool, carrierId);
  const now = Date.now();
  const [mode, depths, dueNow, lateness, staleness, polled, configs, scheduler, groups] = await settleAll([
    getPollingMode(pool),
    store.depths(carrier.id),
    store.dueNowCount(carrier.id, now),
    latenessPercentiles(pool, carrier.id, LATENESS_WINDOW_MS),
    stalenessByType(pool, carrier.id, STALENESS_WINDOW_MS),
    polledCountsByStatus(pool, carrier.id),
    listPollingConfigs(pool, { enabledOnly: true }),
    schedulerView(ctx, carrier.id),
    Promise.all(carrier.groups.map((group) => groupStatus(ctx, carrier.id, group.name, group.qps, now))),
  ]);
  const rebuilding = await rebuildState(ctx, mode.mode);
  const intervals = new IntervalResolver(configs);
  const cardsTotal = polled
    .filter(({ status }) => Object.keys(intervals.resolve({ carrierId: carrier.id, status })).length > 0)
    .reduce((sum, { count }) => sum + count, 0);
  return {
    carrierId: carrier.id,
    mode: mode.mode,
    paused: scheduler?.paused ?? false,
    inflight: depths.running,
    lanes: { priority: depths.priority, normal: depths.normal },
    dueNow,
    groups,
    latenessMs: lateness,
    staleness,
    expiredLeases: scheduler?.expiredLeases ?? 0,
    capacity: capacityOf(carrier, polled, intervals, scheduler?.orchestration.capacityPerSec ?? null),
    limitedBy: scheduler?.orchestration.limitedBy ?? 'unknown',
    ...(scheduler === undefined ? {} : { orchestration: scheduler.orchestration }),
    schedulerRunning: scheduler !== undefined,
    // A card is in one lane at a time (claimed cards stay in theirs, scored past now).
    rebuild: { state: rebuilding, cardsDone: depths.priority + depths.normal, cardsTotal },
  };
}
