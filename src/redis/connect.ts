/**
 * Opens the Redis connection every process uses and refuses a server whose eviction policy could
 * drop keys: a lease or due score silently evicted would lose a card from polling.
 */
import { Redis } from 'ioredis';

export class RedisEvictionPolicyError extends Error {
  constructor(readonly policy: string) {
    super(`Redis maxmemory-policy is "${policy}"; it must be "noeviction" so leases and due scores are never evicted`);
    this.name = 'RedisEvictionPolicyError';
  }
}

export async function readEvictionPolicy(redis: Redis): Promise<string> {
  const reply = (await redis.config('GET', 'maxmemory-policy')) as string[];
  return reply[1] ?? 'unknown';
}

export async function connectRedis(url: string, options: { connectionName?: string } = {}): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectionName: options.connectionName,
    // Commands wait for a reconnect instead of failing at once; activities have their own timeouts.
    maxRetriesPerRequest: 3,
  });
  await redis.connect();
  const policy = await readEvictionPolicy(redis);
  if (policy !== 'noeviction') {
    redis.disconnect();
    throw new RedisEvictionPolicyError(policy);
  }
  return redis;
}
