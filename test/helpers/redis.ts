/**
 * Test access to the real Redis started by `npm run services:up`. Each call gets a fresh key
 * namespace so tests sharing one Redis never see each other's keys.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { connectRedis } from '../../src/redis/connect.js';
import { loadConfig } from '../../src/config/index.js';

export interface TestRedis {
  readonly redis: Redis;
  /** Prepend to every key (pass as the store's namespace). Ends with ':'. */
  readonly namespace: string;
  /** Deletes every key under the namespace and closes the connection. */
  readonly close: () => Promise<void>;
}

export async function createTestRedis(label = 'test'): Promise<TestRedis> {
  const config = loadConfig();
  const safeLabel = label.replace(/[^a-zA-Z0-9_-]/g, '_');
  const redis = await connectRedis(config.REDIS_URL, { connectionName: `test-${safeLabel}` });
  const namespace = `t:${safeLabel}:${randomUUID().slice(0, 8)}:`;
  return {
    redis,
    namespace,
    async close() {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${namespace}*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) await redis.unlink(...keys);
      } while (cursor !== '0');
      await redis.quit();
    },
  };
}
