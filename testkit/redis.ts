/**
 * Test access to the real Redis started by `npm run services:up`, or the Redis Cluster when
 * REDIS_CLUSTER_NODES is set (`npm run test:cluster`). Each call gets a fresh key namespace so
 * tests sharing one Redis never see each other's keys.
 */
import { randomUUID } from 'node:crypto';
import { connectRedisFromConfig } from '../src/redis/connect.js';
import { deleteMatching, type RedisConnection } from '../src/redis/connection.js';
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
