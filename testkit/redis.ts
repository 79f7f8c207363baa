/**
 * Test access to the real Redis started by `npm run services:up`, or the Redis Cluster when
 * REDIS_CLUSTER_NODES is set (`npm run test:cluster`). Each call gets a fresh key namespace so
 * tests sharing one Redis never see each other's keys.
 */
import { randomUUID } from 'node:crypto';
import { connectRedisFromConfig } from '../src/redis/connect.js';
import { groupBySlot, masterNodes, type RedisConnection } from '../src/redis/connection.js';
import { loadConfig } from '../src/config/index.js';

export interface TestRedis {
  readonly redis: RedisConnection;
  /** Prepend to every key (pass as the store's namespace). Ends with ':'. */
  readonly namespace: string;
  /** Deletes every key under the namespace and closes the connection. */
  readonly close: () => Promise<void>;
}

export async function createTestRedis(label = 'test'): Promise<TestRedis> {
  const config = loadConfig();
  const safeLabel = label.replace(/[^a-zA-Z0-9_-]/g, '_');
  const redis = await connectRedisFromConfig(config, { connectionName: `test-${safeLabel}` });
  const namespace = `t:${safeLabel}:${randomUUID().slice(0, 8)}:`;
  return {
    redis,
    namespace,
    async close() {
      await deleteMatching(redis, `${namespace}*`);
      await redis.quit();
    },
  };
}

/**
 * Every key matching `match`, in batches, from every master (SCAN per node: on a cluster one
 * SCAN sees only the node it reaches). A key may be reported twice (SCAN's own guarantee).
 */
export async function* scanKeys(connection: RedisConnection, match: string, count = 1000): AsyncGenerator<string[]> {
  for (const node of masterNodes(connection)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', count);
      cursor = next;
      if (keys.length > 0) yield keys;
    } while (cursor !== '0');
  }
}

/**
 * Deletes every key matching `match` on every master; returns how many were deleted. One UNLINK
 * per key in a pipeline: keys of one SCAN batch may lie in many slots, which one UNLINK may not
 * span on a cluster. Sent through the connection (not the node), so a key whose slot moved is
 * still routed right.
 */
export async function deleteMatching(connection: RedisConnection, match: string, count = 1000): Promise<number> {
  let deleted = 0;
  for await (const keys of scanKeys(connection, match, count)) {
    for (const group of groupBySlot(keys, (key) => key)) {
      const pipeline = connection.pipeline();
      for (const key of group) pipeline.unlink(key);
      for (const [error, reply] of (await pipeline.exec()) ?? []) {
        if (error) throw error;
        deleted += Number(reply);
      }
    }
  }
  return deleted;
}
