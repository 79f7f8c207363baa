/**
 * Reads the whole state of a few accounts and cards from Redis in one pipeline, in the model's
 * shape, so the randomized test can compare the two exactly.
 */
import type { RedisConnection } from '../../../src/redis/connection.js';
import type { AccountKeys } from '../../../src/redis/keys.js';

export interface AccountSnapshot {
  prio: Record<string, number>;
  queue: Record<string, number>;
  running: Record<string, number>;
  claim: Record<string, string>;
  exec: Record<string, string>;
  due: Record<string, Record<string, string>>;
}

function zsetRecord(flat: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (let i = 0; i < flat.length; i += 2) out[flat[i]!] = Number(flat[i + 1]);
  return out;
}

export async function readSnapshot(
  redis: RedisConnection,
  accounts: ReadonlyMap<string, AccountKeys>,
  cardIds: readonly string[],
): Promise<Map<string, AccountSnapshot>> {
  // One pipeline per account: on a Redis Cluster a pipeline may not span slots.
  const perAccount = await Promise.all(
    [...accounts.values()].map((keys) => {
      const pipeline = redis.pipeline();
      pipeline.zrange(keys.prio, 0, -1, 'WITHSCORES');
      pipeline.zrange(keys.queue, 0, -1, 'WITHSCORES');
      pipeline.zrange(keys.running, 0, -1, 'WITHSCORES');
      for (const cardId of cardIds) {
        pipeline.get(keys.claim(cardId));
        pipeline.get(keys.exec(cardId));
        pipeline.hgetall(keys.due(cardId));
      }
      return pipeline.exec();
    }),
  );
  const replies = perAccount.flatMap((reply) => reply ?? []);
  let i = 0;
  const next = (): unknown => {
    const [error, value] = replies[i++] ?? [new Error('missing reply'), null];
    if (error) throw error;
    return value;
  };
  const out = new Map<string, AccountSnapshot>();
  for (const id of accounts.keys()) {
    const snap: AccountSnapshot = {
      prio: zsetRecord(next() as string[]),
      queue: zsetRecord(next() as string[]),
      running: zsetRecord(next() as string[]),
      claim: {},
      exec: {},
      due: {},
    };
    for (const cardId of cardIds) {
      const claim = next() as string | null;
      const exec = next() as string | null;
      const due = next() as Record<string, string>;
      if (claim !== null) snap.claim[cardId] = claim;
      if (exec !== null) snap.exec[cardId] = exec;
      if (Object.keys(due).length > 0) snap.due[cardId] = due;
    }
    out.set(id, snap);
  }
  return out;
}
