/**
 * The lifecycle reconcile: per account, compares the cards PostgreSQL polls under it with the
 * account's Redis lanes and repairs what differs — a polled card in no lane (`missing`), a card in
 * a lane that is not polled or no longer exists (`not_polled`), a card in the lanes of an account
 * it does not belong to (`other_account`), a card whose due times are for other types than it is
 * polled for (`types`). It is the net under the outbox: it catches what no event announced (writes
 * lost in a Redis failover, a key deleted by hand, cards written by other paths). It reads and
 * writes only what differs, and repairs through the same apply as lifecycle events
 * (src/lifecycle/apply.ts), so it is safe beside them; cards with outbox rows waiting are left to
 * the relay. One process at a time (a Redis lock); skipped while a rebuild runs (it does the same).
 */
import { randomUUID } from 'node:crypto';
import type { RedisConnection } from '../redis/connection.js';
import { listCarriers } from '../db/carriers.js';
import { pageCarrierCards } from '../db/cards.js';
import type { ScopedCard } from '../domain/card.js';
import { accountKeys, globalKeys } from '../redis/keys.js';
import { applyRefs, cardsById, pollingIntervals, type ApplyDeps } from './apply.js';
import { REPAIR_KINDS, type LifecycleMetrics, type RepairKind } from './metrics.js';
import { cardsWithPendingRows, type OutboxRef } from './outboxRows.js';
import { loadPollingContext, type PollingContext } from './pollingContext.js';
import { laneMembers, readDuesMany } from './queueStore.js';

export const DEFAULT_RECONCILE_BATCH = 1000;
/** Lock lifetime; extended after every page, so only a stalled reconcile loses it. */
export const DEFAULT_RECONCILE_LOCK_MS = 60_000;

const EXTEND_LOCK = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE_LOCK = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

/** The reconcile's lock (no hash tag: never used in a script with account keys). */
export function reconcileLockKey(namespace: string): string {
  return `${namespace}poll:lock:reconcile`;
}

export interface ReconcileOptions {
  /** One account; all when absent. */
  readonly carrierId?: string;
  readonly batchSize?: number;
  readonly lockMs?: number;
}

export interface ReconcileResult {
  readonly skipped: 'locked' | 'rebuilding' | 'legacy_mode' | null;
  readonly carriers: number;
  /** Cards of PostgreSQL and lane members looked at. */
  readonly checked: number;
  readonly repaired: Record<RepairKind, number>;
  readonly durationMs: number;
}

interface Candidate {
  readonly kind: RepairKind;
  readonly cardId: string;
}

interface Pass {
  readonly deps: ApplyDeps;
  readonly context: PollingContext;
  readonly carrierId: string;
  readonly metrics: LifecycleMetrics | undefined;
  readonly repaired: Record<RepairKind, number>;
  checked: number;
}

export async function reconcile(deps: ApplyDeps, options: ReconcileOptions = {}, metrics?: LifecycleMetrics): Promise<ReconcileResult> {
  const started = Date.now();
  const repaired = Object.fromEntries(REPAIR_KINDS.map((kind) => [kind, 0])) as Record<RepairKind, number>;
  const result = (skipped: ReconcileResult['skipped'], carriers = 0, checked = 0): ReconcileResult => ({
    skipped,
    carriers,
    checked,
    repaired,
    durationMs: Date.now() - started,
  });
  const lockKey = reconcileLockKey(deps.namespace);
  const lockMs = options.lockMs ?? DEFAULT_RECONCILE_LOCK_MS;
  if ((await deps.redis.exists(globalKeys(deps.namespace).rebuildLock)) === 1) return result('rebuilding');
  const owner = randomUUID();
  if ((await deps.redis.set(lockKey, owner, 'PX', lockMs, 'NX')) !== 'OK') return result('locked');
  const extendLock = async (): Promise<void> => {
    if (Number(await deps.redis.eval(EXTEND_LOCK, 1, lockKey, owner, lockMs)) !== 1)
      throw new Error(`reconcile lost its lock ${lockKey} (expired while running); stopped`);
  };
  try {
    const context = await loadPollingContext(deps.pool);
    if (context.mode !== 'carrier') return result('legacy_mode');
    const carrierIds = options.carrierId ? [options.carrierId] : (await listCarriers(deps.pool)).map((carrier) => carrier.id);
    let checked = 0;
    for (const carrierId of carrierIds) {
      const pass: Pass = { deps, context, carrierId, metrics, repaired, checked: 0 };
      await reconcileCarrier(pass, options.batchSize ?? DEFAULT_RECONCILE_BATCH, extendLock);
      checked += pass.checked;
    }
    return result(null, carrierIds.length, checked);
  } finally {
    await deps.redis.eval(RELEASE_LOCK, 1, lockKey, owner);
  }
}

async function reconcileCarrier(pass: Pass, batchSize: number, extendLock: () => Promise<void>): Promise<void> {
  const { deps, carrierId, context } = pass;
  // Every card PostgreSQL had under the account when its page was read: lane members outside it are checked apart.
  const seen = new Set<string>();
  let afterId = '0';
  for (;;) {
    const cards = await pageCarrierCards(deps.pool, carrierId, afterId, batchSize);
    if (cards.length === 0) break;
    afterId = cards.at(-1)!.id;
    const ids = cards.map((card) => card.id);
    const [inLane, dues] = await Promise.all([
      laneMembership(deps.redis, deps.namespace, carrierId, ids),
      readDuesMany(deps.redis, deps.namespace, carrierId, ids),
    ]);
    const candidates: Candidate[] = [];
    for (const card of cards) {
      seen.add(card.id);
      const kind = discrepancy(card, carrierId, context, inLane.has(card.id), Object.keys(dues.get(card.id) ?? {}));
      if (kind) candidates.push({ kind, cardId: card.id });
    }
    pass.checked += cards.length;
    await repair(pass, candidates);
    await extendLock();
  }
  for await (const members of laneMembers(deps.redis, deps.namespace, carrierId, batchSize)) {
    const strays = [...new Set(members.filter((cardId) => !seen.has(cardId)))];
    pass.checked += strays.length;
    if (strays.length === 0) continue;
    // A card in both lanes (never by the scripts) is looked at once.
    for (const cardId of strays) seen.add(cardId);
    const current = await cardsById(deps.pool, strays);
    // A card created under this account after its page was read is not a stray.
    const candidates = strays.flatMap((cardId): Candidate[] => {
      const card = current.get(cardId);
      if (card && card.carrierId !== carrierId) return [{ kind: 'other_account', cardId }];
      return pollingIntervals(card, carrierId, context.intervals) === null ? [{ kind: 'not_polled', cardId }] : [];
    });
    await repair(pass, candidates);
    await extendLock();
  }
}

/** What is wrong with a card of this account's page, or null. */
function discrepancy(card: ScopedCard, carrierId: string, context: PollingContext, inLane: boolean, dueTypes: readonly string[]): RepairKind | null {
  const intervals = pollingIntervals(card, carrierId, context.intervals);
  if (intervals === null) return inLane ? 'not_polled' : null;
  if (!inLane) return 'missing';
  const wanted = Object.keys(intervals).sort().join(',');
  return [...dueTypes].sort().join(',') === wanted ? null : 'types';
}

/**
 * Repairs the candidates through the lifecycle's apply, counting those that PostgreSQL, read just
 * before the repair, still confirms (a card that an event changed meanwhile was that event's).
 */
async function repair(pass: Pass, candidates: readonly Candidate[]): Promise<void> {
  if (candidates.length === 0) return;
  const { deps, carrierId, context } = pass;
  const pending = await cardsWithPendingRows(
    deps.pool,
    candidates.map((candidate) => candidate.cardId),
  );
  const todo = candidates.filter((candidate) => !pending.has(candidate.cardId));
  if (todo.length === 0) return;
  const current = await cardsById(
    deps.pool,
    todo.map((candidate) => candidate.cardId),
  );
  const confirmed = todo.filter(({ kind, cardId }) => {
    const polledHere = pollingIntervals(current.get(cardId), carrierId, context.intervals) !== null;
    return kind === 'missing' || kind === 'types' ? polledHere : !polledHere;
  });
  if (confirmed.length === 0) return;
  const refs: OutboxRef[] = confirmed.map(({ cardId }) => ({ cardId, carrierId }));
  // A card found in another account's lanes must end in its own account's (and only there).
  for (const { kind, cardId } of confirmed) {
    const owner = current.get(cardId)?.carrierId;
    if (kind === 'other_account' && owner !== undefined) refs.push({ cardId, carrierId: owner });
  }
  await applyRefs(deps, context, refs, current);
  for (const { kind } of confirmed) pass.repaired[kind] += 1;
  for (const kind of REPAIR_KINDS) {
    const count = confirmed.filter((candidate) => candidate.kind === kind).length;
    if (count > 0) pass.metrics?.repaired(kind, count);
  }
}

/** Which of the cards are in one of the account's two lanes (one pipeline). */
async function laneMembership(redis: RedisConnection, namespace: string, carrierId: string, cardIds: readonly string[]): Promise<Set<string>> {
  const keys = accountKeys(namespace, carrierId);
  const pipeline = redis.pipeline();
  for (const cardId of cardIds) pipeline.zscore(keys.prio, cardId).zscore(keys.queue, cardId);
  const replies = (await pipeline.exec()) ?? [];
  const result = new Set<string>();
  cardIds.forEach((cardId, index) => {
    const [prioError, prio] = replies[index * 2] ?? [null, null];
    const [queueError, queue] = replies[index * 2 + 1] ?? [null, null];
    if (prioError) throw prioError;
    if (queueError) throw queueError;
    if (prio !== null || queue !== null) result.add(cardId);
  });
  return result;
}
