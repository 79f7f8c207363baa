/**
 * Rebuild (docs/design.md, 'Rebuild and the Redis-flush guard' and 'Modes'): reconstructs accounts'
 * Redis structures from PostgreSQL, in batches, under a global lock. Idempotent: due times still in
 * Redis are kept (the card keeps its phase), missing ones get the initial jitter, cards Redis holds
 * but PostgreSQL no longer polls under the account are removed, and pending priority items are
 * requested again. Safe beside live lifecycle traffic: see rebuildCarrier. {@link requestRebuild}
 * is the entry for configuration changes: a request while a rebuild runs gets one more full pass
 * after it.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisConnection } from '../redis/connection.js';
import type pg from 'pg';
import { listCarriers } from '../db/carriers.js';
import { findCards, pageCarrierCards } from '../db/cards.js';
import { failPendingPriorityItem, listPendingPriorityItems } from '../db/priorityItems.js';
import { globalKeys } from '../redis/keys.js';
import type { UpsertInput } from '../redis/carrierQueueStore.js';
import type { ScopedCard } from '../domain/card.js';
import type { IntervalResolver, Intervals } from '../domain/pollingConfig.js';
import { requireId } from '../domain/validate.js';
import { dueCaps, initialDues } from './jitter.js';
import { loadPollingContext } from './pollingContext.js';
import { laneMembers, readDuesMany, storeClock, type LifecycleStore } from './queueStore.js';

export const DEFAULT_REBUILD_BATCH = 1000;
/** Lock lifetime; extended after every batch, so only a stalled rebuild loses it. */
export const DEFAULT_REBUILD_LOCK_MS = 60_000;

/** How often a requested rebuild checks whether the running one (another process') has ended. */
export const DEFAULT_REQUEST_POLL_MS = 500;
const CARD_ID = /^[1-9][0-9]{0,18}$/;

/**
 * Set while a full rebuild is wanted that has not started yet; every full pass clears it when it
 * starts (after taking the lock, before reading anything). No hash tag needed: never in a script.
 */
function againKey(lockKey: string): string {
  return `${lockKey}:again`;
}

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
  readonly redis: RedisConnection;
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
  /** Called at every page (with the lock's extension): the mode switch heartbeats its activity here. */
  readonly onProgress?: () => void;
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

  if ((await deps.redis.set(lockKey, owner, 'PX', lockMs, 'NX')) !== 'OK') throw new RebuildLockedError(lockKey);
  const extendLock = async (): Promise<void> => {
    options.onProgress?.();
    if (Number(await deps.redis.eval(EXTEND_LOCK, 1, lockKey, owner, lockMs)) !== 1) throw new RebuildLockLostError(lockKey);
  };
  const full = options.carrierId === undefined;
  try {
    // A full pass reads the configuration after this point, so it serves every request made before it.
    if (full) await deps.redis.del(againKey(lockKey));
    const context = await loadPollingContext(deps.pool);
    if (context.mode !== 'carrier' && !options.ignoreMode) {
      return { skipped: 'legacy_mode', carriers: 0, ...counters, durationMs: Date.now() - started };
    }
    const carrierIds = options.carrierId ? [requireId(options.carrierId, 'carrierId')] : (await listCarriers(deps.pool)).map((carrier) => carrier.id);
    const now = options.now ?? (await storeClock(deps.store));
    for (const carrierId of carrierIds) {
      await rebuildCarrier(
        {
          deps,
          namespace,
          carrierId,
          intervals: context.intervals,
          now,
          random: options.random ?? Math.random,
          counters,
        },
        options.batchSize ?? DEFAULT_REBUILD_BATCH,
        extendLock,
      );
    }
    return { skipped: null, carriers: carrierIds.length, ...counters, durationMs: Date.now() - started };
  } catch (error) {
    // A failed full pass leaves the request standing for whoever rebuilds next.
    if (full) await deps.redis.set(againKey(lockKey), '1').catch(() => undefined);
    throw error;
  } finally {
    await deps.redis.eval(RELEASE_LOCK, 1, lockKey, owner);
  }
}

/** What one account's pass works with. */
interface CarrierPass {
  readonly deps: RebuildDeps;
  readonly namespace: string;
  readonly carrierId: string;
  readonly intervals: IntervalResolver;
  readonly now: () => number;
  readonly random: () => number;
  readonly counters: Counters;
}

/**
 * Lifecycle events run beside the rebuild (PostgreSQL first, then Redis). Pages are read before
 * they are written, so every write is checked against PostgreSQL *after* it is made: a card
 * upserted from a page that was disabled or moved out meanwhile is taken out again, and cards
 * the lanes hold that the pages did not poll are removed only when PostgreSQL still says so.
 */
async function rebuildCarrier(pass: CarrierPass, batchSize: number, extendLock: () => Promise<void>): Promise<void> {
  const { deps, namespace, carrierId, counters } = pass;
  // Ids the pages polled; anything else in the lanes afterwards is a candidate for removal.
  const polled = new Set<string>();

  let afterId = '0';
  for (;;) {
    const cards = await pageCarrierCards(deps.pool, carrierId, afterId, batchSize);
    if (cards.length === 0) break;
    afterId = cards.at(-1)!.id;
    const existing = await readDuesMany(
      deps.redis,
      namespace,
      carrierId,
      cards.map((card) => card.id),
    );
    const at = pass.now();
    const upserts: UpsertInput[] = [];
    const unpolled: string[] = [];
    for (const card of cards) {
      const keep = existing.get(card.id) ?? {};
      const intervals = pollingIntervals(card, carrierId, pass.intervals) ?? {};
      const dues = initialDues(intervals, at, pass.random, keep);
      if (Object.keys(dues).length === 0) {
        // Not polled per this page; it leaves Redis only if PostgreSQL still says so when we remove it.
        if (Object.keys(keep).length > 0) unpolled.push(card.id);
        continue;
      }
      polled.add(card.id);
      counters.upserted += 1;
      for (const type of Object.keys(dues) as (keyof typeof dues)[]) {
        if (keep[type] !== undefined) counters.keptDues += 1;
        else counters.newDues += 1;
      }
      // Conditional (caps): Redis keeps a due set since the read above (a finish, a lifecycle event),
      // never the stale one read (docs/design.md, 'Rebuild and the Redis-flush guard').
      upserts.push({ carrierId, cardId: card.id, now: at, dues, caps: dueCaps(intervals, at) });
    }
    if (upserts.length > 0) await deps.store.upsertMany(upserts);
    await settle(pass, [...upserts.map((upsert) => upsert.cardId), ...unpolled]);
    counters.batches += 1;
    await extendLock();
  }

  for await (const members of laneMembers(deps.redis, namespace, carrierId, batchSize)) {
    const candidates = members.filter((cardId) => !polled.has(cardId));
    if (candidates.length > 0) await settle(pass, candidates);
  }
  await extendLock();

  await requestPending(deps, carrierId, batchSize, pass.now, counters);
}

/** The card's intervals when PostgreSQL polls it under this account (at least one type), else null. */
function pollingIntervals(card: ScopedCard | undefined, carrierId: string, intervals: IntervalResolver): Intervals | null {
  if (!card || card.carrierId !== carrierId || !card.polled) return null;
  const resolved = intervals.resolve(card);
  return Object.keys(resolved).length > 0 ? resolved : null;
}

/**
 * Takes out of the account's Redis the cards PostgreSQL does not poll under it *now* (cards and
 * polling configs read again here). A lifecycle event that lands between that read and the
 * removal wrote PostgreSQL first, so a second read after the removal sees it: those cards are put back (a card briefly in no lane is fine, one in
 * two is not: docs/design.md, 'Lifecycle').
 */
async function settle(pass: CarrierPass, cardIds: readonly string[]): Promise<void> {
  if (cardIds.length === 0) return;
  const { deps, carrierId } = pass;
  const current = await cardsById(deps.pool, cardIds);
  if (cardIds.every((cardId) => pollingIntervals(current.get(cardId), carrierId, pass.intervals) !== null)) return;
  // Removal is decided on the polling configs as they are now, not as the pass read them: a config
  // created since (an account being set up: its config, then its cards, within a second) polls
  // cards the pass's copy does not, and taking them out left them unpolled until the periodic
  // reconcile (likely what left a cluster test's new account without its 3 cards for 5 minutes, CI run 64).
  const latest = (await loadPollingContext(deps.pool)).intervals;
  const stale = cardIds.filter((cardId) => pollingIntervals(current.get(cardId), carrierId, latest) === null);
  if (stale.length === 0) return;
  const kept = await readDuesMany(deps.redis, pass.namespace, carrierId, stale);
  await deps.store.removeMany(stale.map((cardId) => ({ carrierId, cardId })));
  const after = await cardsById(deps.pool, stale);
  const afterIntervals = (await loadPollingContext(deps.pool)).intervals;
  const at = pass.now();
  const restore: UpsertInput[] = [];
  for (const cardId of stale) {
    const intervals = pollingIntervals(after.get(cardId), carrierId, afterIntervals);
    // Conditional too: an event that put the card back since the removal keeps its due times.
    if (intervals)
      restore.push({ carrierId, cardId, now: at, dues: initialDues(intervals, at, pass.random, kept.get(cardId) ?? {}), caps: dueCaps(intervals, at) });
  }
  if (restore.length > 0) await deps.store.upsertMany(restore);
  pass.counters.removed += stale.length - restore.length;
}

/** Cards by id as PostgreSQL has them now; ids that are not card ids (or gone) are absent. */
async function cardsById(pool: pg.Pool, cardIds: readonly string[]): Promise<Map<string, ScopedCard>> {
  const ids = cardIds.filter((cardId) => CARD_ID.test(cardId));
  if (ids.length === 0) return new Map();
  return new Map((await findCards(pool, ids)).map((card) => [card.id, card]));
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

export type RequestRebuildOptions = Pick<RebuildOptions, 'batchSize' | 'lockMs' | 'now' | 'random'> & {
  /** @default 500 */
  readonly pollMs?: number;
};

interface ActiveRequest {
  /** Another request arrived in this process since the loop last raised the flag. */
  again: boolean;
  done: Promise<RebuildResult[]>;
}

/** One request loop per lock key in this process; later requests join it. */
const activeRequests = new Map<string, ActiveRequest>();

/**
 * Asks for a full rebuild (e.g. after a polling-config change) and resolves once a full pass that
 * started after the call has run — here, or in another process that held the lock. Never dropped:
 * while a rebuild runs the request raises a flag in Redis and waits; whichever process rebuilds
 * next clears it when it starts, so any number of requests during one pass cost one more pass.
 * Returns the passes this process ran (empty when another process's pass served the request).
 */
export function requestRebuild(deps: RebuildDeps, options: RequestRebuildOptions = {}): Promise<RebuildResult[]> {
  const lockKey = globalKeys(deps.namespace ?? '').rebuildLock;
  const active = activeRequests.get(lockKey);
  if (active) {
    active.again = true;
    return active.done;
  }
  const entry: ActiveRequest = { again: true, done: Promise.resolve([]) };
  entry.done = runRequests(deps, options, lockKey, entry);
  activeRequests.set(lockKey, entry);
  return entry.done;
}

async function runRequests(deps: RebuildDeps, options: RequestRebuildOptions, lockKey: string, entry: ActiveRequest): Promise<RebuildResult[]> {
  const flagKey = againKey(lockKey);
  const results: RebuildResult[] = [];
  try {
    for (;;) {
      if (entry.again) {
        entry.again = false;
        await deps.redis.set(flagKey, '1');
      }
      // Cleared = a full pass started after the last request (ours or another process's) and
      // serves it. Checked and left without an await in between, so no request joins too late.
      if ((await deps.redis.exists(flagKey)) === 0 && !entry.again) {
        activeRequests.delete(lockKey);
        return results;
      }
      try {
        results.push(await rebuild(deps, options));
      } catch (error) {
        if (!(error instanceof RebuildLockedError)) throw error;
        // Another rebuild runs; it may have read the configuration before our change.
        await sleep(options.pollMs ?? DEFAULT_REQUEST_POLL_MS);
      }
    }
  } catch (error) {
    activeRequests.delete(lockKey);
    throw error;
  }
}
