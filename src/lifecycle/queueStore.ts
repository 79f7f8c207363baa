/**
 * The part of the Redis store (src/redis/carrierQueueStore.ts, owned by the Redis area) that
 * lifecycle and rebuild use, plus a small batched reader of existing due times that the store
 * does not offer (readDue is one round trip per card).
 */
import type { RedisConnection } from '../redis/connection.js';
import { CHECK_TYPES, type CheckType } from '../workflow-safe/checkTypes.js';
import type { CarrierQueueStore } from '../redis/carrierQueueStore.js';
import { DueField } from '../redis/dueFields.js';
import { accountKeys } from '../redis/keys.js';

export type LifecycleStore = Pick<CarrierQueueStore, 'upsert' | 'upsertMany' | 'remove' | 'removeMany' | 'requestCheck' | 'laneOf' | 'clockNow'>;

/**
 * "Now" on the store's clock (Redis TIME in production) as a cheap synchronous function: the
 * offset to this process' clock is read once, so due times written by a host whose own clock is
 * off still land on the timeline the claim reads.
 */
export async function storeClock(store: Pick<CarrierQueueStore, 'clockNow'>): Promise<() => number> {
  const offset = (await store.clockNow()) - Date.now();
  return () => Date.now() + offset;
}

export type Dues = Partial<Record<CheckType, number>>;

/** Existing `due:<type>` values of many cards of one account, in one pipeline (HMGET each). */
export async function readDuesMany(redis: RedisConnection, namespace: string, carrierId: string, cardIds: readonly string[]): Promise<Map<string, Dues>> {
  const keys = accountKeys(namespace, carrierId);
  const fields = CHECK_TYPES.map((type) => DueField.due(type));
  const pipeline = redis.pipeline();
  for (const cardId of cardIds) pipeline.hmget(keys.due(cardId), ...fields);
  const replies = (await pipeline.exec()) ?? [];
  const result = new Map<string, Dues>();
  replies.forEach(([error, reply], index) => {
    if (error) throw error;
    const values = reply as (string | null)[];
    const dues: Dues = {};
    CHECK_TYPES.forEach((type, typeIndex) => {
      const raw = values[typeIndex];
      const due = raw === null || raw === undefined ? NaN : Number(raw);
      if (Number.isFinite(due)) dues[type] = due;
    });
    result.set(cardIds[index]!, dues);
  });
  return result;
}

/** Every card id in an account's two lanes, streamed with ZSCAN so huge lanes never load at once. */
export async function* laneMembers(redis: RedisConnection, namespace: string, carrierId: string, count = 1000): AsyncGenerator<string[]> {
  const keys = accountKeys(namespace, carrierId);
  for (const lane of [keys.prio, keys.queue]) {
    let cursor = '0';
    do {
      const [next, flat] = await redis.zscan(lane, cursor, 'COUNT', count);
      cursor = next;
      // ZSCAN returns member, score, member, score …
      const members = flat.filter((_, index) => index % 2 === 0);
      if (members.length > 0) yield members;
    } while (cursor !== '0');
  }
}
