/**
 * Brings the Redis keys of (card, account) pairs in line with PostgreSQL — the one write path of
 * lifecycle events, the outbox relay and the reconcile (docs/design.md, 'Lifecycle').
 *
 * What is written is derived from the card as PostgreSQL has it, never carried along: applying a
 * pair twice, late or out of order writes the same thing. Writers race (the event's own writer,
 * the relay, the reconcile, a second event on the same card), so every write is checked against
 * PostgreSQL *after* it is made: a writer whose write landed last then sees any change committed
 * before it and writes again. A change committed after that check has its own outbox rows and
 * writer. Removals go before upserts, so a card moved between accounts is briefly in neither,
 * never in both.
 */
import type pg from 'pg';
import { findCards } from '../db/cards.js';
import type { ScopedCard } from '../domain/card.js';
import type { IntervalResolver, Intervals } from '../domain/pollingConfig.js';
import type { RedisConnection } from '../redis/connection.js';
import type { UpsertInput } from '../redis/carrierQueueStore.js';
import { dueCaps, initialDues } from './jitter.js';
import type { PollingContext } from './pollingContext.js';
import type { OutboxRef } from './outboxRows.js';
import { readDuesMany, type LifecycleStore } from './queueStore.js';

export interface ApplyDeps {
  readonly pool: pg.Pool;
  readonly store: LifecycleStore;
  /** For reading the due times a card keeps (the store reads one card per round trip). */
  readonly redis: RedisConnection;
  readonly namespace: string;
  /** "Now" on the store's clock; the store's own when absent. */
  readonly now?: () => number;
  /** [0, 1) source for the jitter of new types. */
  readonly random?: () => number;
  /**
   * Wakes the schedulers of these accounts: a card was made due before they wake up on their own
   * (lua/wakeIfIdle.lua). Absent: they find the card at their next wake-up (SCHEDULER_IDLE_MAX_MS).
   */
  readonly wakeSchedulers?: SchedulerWaker;
}

/** Wakes the sleeping schedulers of these accounts (best effort: a scheduler not running is skipped). */
export type SchedulerWaker = (carrierIds: readonly string[]) => Promise<void>;

/** Writes and re-checks before the pairs are left to the next attempt (a card changing that fast is rare). */
export const MAX_APPLY_ROUNDS = 3;
const CARD_ID = /^[1-9][0-9]{0,18}$/;

/** The card's intervals when PostgreSQL polls it under this account (at least one type), else null (= not in this account's Redis). */
export function pollingIntervals(card: ScopedCard | undefined, carrierId: string, intervals: IntervalResolver): Intervals | null {
  if (!card || card.carrierId !== carrierId || !card.polled) return null;
  const resolved = intervals.resolve(card);
  return Object.keys(resolved).length > 0 ? resolved : null;
}

/** Cards by id as PostgreSQL has them now; ids that are not card ids (or gone) are absent. */
export async function cardsById(pool: pg.Pool, cardIds: readonly string[]): Promise<Map<string, ScopedCard>> {
  const ids = [...new Set(cardIds)].filter((cardId) => CARD_ID.test(cardId));
  if (ids.length === 0) return new Map();
  return new Map((await findCards(pool, ids)).map((card) => [card.id, card]));
}

/** What a pair's keys must hold: the polled types, or nothing. Equal targets = nothing to write again. */
function target(cards: ReadonlyMap<string, ScopedCard>, ref: OutboxRef, intervals: IntervalResolver): string {
  const resolved = pollingIntervals(cards.get(ref.cardId), ref.carrierId, intervals);
  return resolved === null ? '' : Object.keys(resolved).sort().join(',');
}

function uniqueRefs(refs: readonly OutboxRef[]): OutboxRef[] {
  const seen = new Map<string, OutboxRef>();
  for (const ref of refs) seen.set(`${ref.carrierId}/${ref.cardId}`, { cardId: ref.cardId, carrierId: ref.carrierId });
  return [...seen.values()];
}

/**
 * Applies the pairs; true when Redis matched PostgreSQL as read after the last write (false: the
 * cards kept changing, the caller leaves the pairs to a later attempt). `cards`: PostgreSQL's view
 * the caller already holds (a write's RETURNING), saving the first read. Throws when Redis fails.
 */
export async function applyRefs(
  deps: ApplyDeps,
  context: PollingContext,
  refs: readonly OutboxRef[],
  cards?: ReadonlyMap<string, ScopedCard>,
): Promise<boolean> {
  // In legacy mode another system polls; the switch to carrier mode rebuilds Redis from PostgreSQL.
  if (context.mode !== 'carrier' || refs.length === 0) return true;
  const pairs = uniqueRefs(refs);
  const cardIds = pairs.map((ref) => ref.cardId);
  let current = cards ?? (await cardsById(deps.pool, cardIds));
  for (let round = 0; round < MAX_APPLY_ROUNDS; round += 1) {
    await write(deps, context.intervals, pairs, current);
    const after = await cardsById(deps.pool, cardIds);
    if (pairs.every((ref) => target(current, ref, context.intervals) === target(after, ref, context.intervals))) return true;
    current = after;
  }
  return false;
}

async function write(deps: ApplyDeps, intervals: IntervalResolver, pairs: readonly OutboxRef[], cards: ReadonlyMap<string, ScopedCard>): Promise<void> {
  const removals: OutboxRef[] = [];
  const upserts: { ref: OutboxRef; intervals: Intervals }[] = [];
  for (const ref of pairs) {
    const resolved = pollingIntervals(cards.get(ref.cardId), ref.carrierId, intervals);
    if (resolved === null) removals.push(ref);
    else upserts.push({ ref, intervals: resolved });
  }
  if (removals.length > 0) await deps.store.removeMany(removals);
  if (upserts.length === 0) return;
  // Due times on the store's clock (Redis TIME), not this host's.
  const now = deps.now ? deps.now() : await deps.store.clockNow();
  const random = deps.random ?? Math.random;
  const byCarrier = new Map<string, string[]>();
  for (const { ref } of upserts) {
    const ids = byCarrier.get(ref.carrierId);
    if (ids) ids.push(ref.cardId);
    else byCarrier.set(ref.carrierId, [ref.cardId]);
  }
  const kept = new Map(
    await Promise.all([...byCarrier].map(async ([carrierId, ids]) => [carrierId, await readDuesMany(deps.redis, deps.namespace, carrierId, ids)] as const)),
  );
  // A type the card keeps keeps its due time (the card's phase); only a new type is jittered. The
  // write is conditional (caps): the due Redis holds when it lands is kept, not the one read above,
  // which a finish may have replaced since; what was read only stands in for a hash gone meanwhile.
  const inputs: UpsertInput[] = upserts.map(({ ref, intervals: resolved }) => ({
    carrierId: ref.carrierId,
    cardId: ref.cardId,
    now,
    dues: initialDues(resolved, now, random, kept.get(ref.carrierId)?.get(ref.cardId) ?? {}),
    caps: dueCaps(resolved, now),
  }));
  const toWake = await deps.store.upsertMany(inputs);
  // Not awaited: the write is done, and a wake that cannot be sent (Temporal away) only leaves the
  // scheduler to its own wake-up; it must not hold the lifecycle event up.
  if (toWake.length > 0 && deps.wakeSchedulers) void deps.wakeSchedulers(toWake).catch(() => undefined);
}
