/**
 * Opens the Redis connection every process uses and refuses a server whose eviction policy could
 * drop keys: a lease or due score silently evicted would lose a card from polling.
 */
import { Redis } from 'ioredis';
import { logConnectionErrors } from '../db/connectionErrors.js';

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

/**
 * Connects, or throws when the server cannot be reached now. Once connected, the connection
 * outlives Redis outages: ioredis reconnects by itself (its default retry strategy: every ≤ 2 s,
 * for ever), commands meanwhile fail with an error their caller handles, and the outage is logged
 * on stderr, rate-limited (see src/db/connectionErrors.ts).
 */
export async function connectRedis(url: string, options: { connectionName?: string } = {}): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectionName: options.connectionName,
    // Commands wait for a reconnect instead of failing at once; activities have their own timeouts.
    maxRetriesPerRequest: 3,
    // Commands issued in the same tick go out as one pipeline: many concurrent activities share
    // this connection, and one write per batch instead of one per command saves round trips.
    enableAutoPipelining: true,
  });
  const errors = logConnectionErrors(redis, `redis(${options.connectionName ?? 'card-poller'})`);
  redis.on('ready', () => errors.recovered());
  try {
    await redis.connect();
  } catch (error) {
    // Without this the failed connection would keep reconnecting (and logging) in the background.
    redis.disconnect();
    throw error;
  }
  const policy = await readEvictionPolicy(redis);
  if (policy !== 'noeviction') {
    redis.disconnect();
    throw new RedisEvictionPolicyError(policy);
  }
  return redis;
}
