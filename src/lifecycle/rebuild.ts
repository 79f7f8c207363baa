/**
 * Rebuild (DESIGN §7, §8, §9): reconstructs accounts' Redis structures from PostgreSQL, in
 * batches, under a global lock. Idempotent: due times still in Redis are kept (the card keeps
 * its phase), missing ones get the initial jitter, cards Redis holds but PostgreSQL no longer
 * polls under the account are removed, and pending priority items are requested again.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { listCarriers } from '../db/carriers.js';
import { pageCarrierCards } from '../db/cards.js';
import { failPendingPriorityItem, listPendingPriorityItems } from '../db/priorityItems.js';
import { globalKeys } from '../redis/keys.js';
import type { UpsertInput } from '../redis/carrierQueueStore.js';
import { requireId } from '../domain/validate.js';
import { initialDues } from './jitter.js';
import { loadPollingContext } from './pollingContext.js';
import { laneMembers, readDuesMany, type LifecycleStore } from './queueStore.js';

export const DEFAULT_REBUILD_BATCH = 1000;
/** Lock lifetime; extended after every batch, so only a stalled rebuild loses it. */
export const DEFAULT_REBUILD_LOCK_MS = 60_000;

/** Compare-and-extend / compare-and-delete: only the holder may touch its lock. */
const EXTEND_LOCK = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE_LOCK = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

export class RebuildLockedError extends Error {
  constructor(readonly lockKey: string) {
    super(`another rebuild holds ${lockKey}`);
    this.name = 'RebuildLockedError';
  }
}

export class RebuildLockLostError extends Error {
  constructor(readonly lockKey: string) {
    super(`rebuild lost its lock ${lockKey} (expired while running); stopped`);
    this.name = 'RebuildLockLostError';
  }
}

export interface RebuildDeps {
  readonly pool: pg.Pool;
  readonly redis: Redis;
  readonly store: LifecycleStore;
  /** Key namespace the store uses (empty in production). */
  readonly namespace?: string;
}

export interface RebuildOptions {
  /** One account; all accounts when absent. */
  readonly carrierId?: string;
  readonly batchSize?: number;
  readonly lockMs?: number;
  readonly now?: () => number;
  readonly random?: () => number;
  /** Rebuild even in legacy mode (the switch to carrier rebuilds before persisting the mode). */
  readonly ignoreMode?: boolean;
}

export interface RebuildResult {
  readonly skipped: 'legacy_mode' | null;
  readonly carriers: number;
  /** Cards upserted (polled, with at least one interval). */
  readonly upserted: number;
  /** Due times kept from Redis vs. freshly jittered. */
  readonly keptDues: number;
  readonly newDues: number;
  /** Cards taken out: unpolled in PostgreSQL, or in a lane without being the account's polled card. */
  readonly removed: number;
  readonly requested: number;
  readonly failedItems: number;
  readonly batches: number;
  readonly durationMs: number;
}

interface Counters {
  upserted: number;
  keptDues: number;
  newDues: number;
  removed: number;
  requested: number;
  failedItems: number;
  batches: number;
}

export async function rebuild(deps: RebuildDeps, options: RebuildOptions = {}): Promise<RebuildResult> {
  const started = Date.now();
  const namespace = deps.namespace ?? '';
  const lockKey = globalKeys(namespace).rebuildLock;
  const lockMs = options.lockMs ?? DEFAULT_REBUILD_LOCK_MS;
  const owner = randomUUID();
  const counters: Counters = { upserted: 0, keptDues: 0, newDues: 0, removed: 0, requested: 0, failedItems: 0, batches: 0 };

  const context = await loadPollingContext(deps.pool);
  if (context.mode !== 'carrier' && !options.ignoreMode) {
    return { skipped: 'legacy_mode', carriers: 0, ...counters, durationMs: Date.now() - started };
  }
  if ((await deps.redis.set(lockKey, owner, 'PX', lockMs, 'NX')) !== 'OK') throw new RebuildLockedError(lockKey);
  const extendLock = async (): Promise<void> => {
    if (Number(await deps.redis.eval(EXTEND_LOCK, 1, lockKey, owner, lockMs)) !== 1) throw new RebuildLockLostError(lockKey);
  };
  try {
    const carrierIds = options.carrierId ? [requireId(options.carrierId, 'carrierId')] : (await listCarriers(deps.pool)).map((carrier) => carrier.id);
    for (const carrierId of carrierIds) {
      await rebuildCarrier(deps, namespace, carrierId, context.intervals, options, counters, extendLock);
    }
    return { skipped: null, carriers: carrierIds.length, ...counters, durationMs: Date.now() - started };
  } finally {
    await deps.redis.eval(RELEASE_LOCK, 1, lockKey, owner);
  }
}

async function rebuildCarrier(
  deps: RebuildDeps,
  namespace: string,
  carrierId: string,
  intervals: Awaited<ReturnType<typeof loadPollingContext>>['intervals'],
  options: RebuildOptions,
  counters: Counters,
  extendLock: () => Promise<void>,
): Promise<void> {
  const batchSize = options.batchSize ?? DEFAULT_REBUILD_BATCH;
  const now = options.now ?? Date.now;
  const random = options.random ?? Math.random;
  // Ids that must stay in this account's lanes; anything else found there afterwards is stale.
  const polled = new Set<string>();

  let afterId = '0';
  for (;;) {
    const cards = await pageCarrierCards(deps.pool, carrierId, afterId, batchSize);
    if (cards.length === 0) break;
    afterId = cards.at(-1)!.id;
    const existing = await readDuesMany(deps.redis, namespace, carrierId, cards.map((card) => card.id));
    const at = now();
    const upserts: UpsertInput[] = [];
    for (const card of cards) {
      const cardIntervals = card.polled ? intervals.resolve(card) : {};
      const keep = existing.get(card.id) ?? {};
      const dues = initialDues(cardIntervals, at, random, keep);
      const types = Object.keys(dues).length;
      if (types === 0) {
        // Not polled: make sure it is in no lane (no-op when it already is not).
        if (Object.keys(keep).length > 0) counters.removed += 1;
      } else {
        polled.add(card.id);
        counters.upserted += 1;
        for (const type of Object.keys(dues) as (keyof typeof dues)[]) {
          if (keep[type] !== undefined) counters.keptDues += 1;
          else counters.newDues += 1;
        }
      }
      upserts.push({ carrierId, cardId: card.id, now: at, dues });
    }
    await deps.store.upsertMany(upserts);
    counters.batches += 1;
    await extendLock();
  }

  for await (const members of laneMembers(deps.redis, namespace, carrierId, batchSize)) {
    const stale = members.filter((cardId) => !polled.has(cardId));
    if (stale.length > 0) counters.removed += await deps.store.removeMany(stale.map((cardId) => ({ carrierId, cardId })));
  }
  await extendLock();

  await requestPending(deps, carrierId, batchSize, now, counters);
}

/** Items still pending after a Redis loss are asked again; a card no longer polled fails its item. */
async function requestPending(deps: RebuildDeps, carrierId: string, batchSize: number, now: () => number, counters: Counters): Promise<void> {
  let afterId = '0';
  for (;;) {
    const items = await listPendingPriorityItems(deps.pool, carrierId, afterId, batchSize);
    if (items.length === 0) break;
    afterId = items.at(-1)!.id;
    for (const item of items) {
      const result = await deps.store.requestCheck({
        carrierId,
        cardId: item.cardId,
        now: now(),
        cooldownMs: item.cooldownMs,
        lane: item.lane,
        types: [...item.types],
        ...(item.confirmDelaysSec.length > 0 ? { confirmDelaysSec: [...item.confirmDelaysSec] } : {}),
        ...(item.expected === null ? {} : { expected: item.expected }),
      });
      if (result.status === 'not_polled') {
        const failed = await failPendingPriorityItem(deps.pool, { itemId: item.id, reason: 'card is no longer polled', source: 'rebuild', actor: 'rebuild' });
        if (failed) counters.failedItems += 1;
      } else {
        counters.requested += 1;
      }
    }
  }
}
