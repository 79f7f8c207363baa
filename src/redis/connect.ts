/**
 * Opens the Redis connection every process uses — one server, or a Redis Cluster when
 * REDIS_CLUSTER_NODES names its nodes — and refuses a server whose eviction policy could drop
 * keys: a lease or due score silently evicted would lose a card from polling.
 */
import { Cluster, Redis } from 'ioredis';
import { logConnectionErrors } from '../runtime/connectionErrors.js';
import { defaultLogger, type LogSink } from '../runtime/logger.js';
import type { ClusterNode } from '../config/index.js';
import { allNodes, isCluster, nodeAddress, type RedisConnection } from './connection.js';

export type { RedisConnection } from './connection.js';

export class RedisEvictionPolicyError extends Error {
  constructor(readonly policy: string) {
    super(`Redis maxmemory-policy is "${policy}"; it must be "noeviction" so leases and due scores are never evicted`);
    this.name = 'RedisEvictionPolicyError';
  }
}

/**
 * The eviction policy, or on a cluster the first node's (masters and replicas: a replica becomes
 * a master on failover) that is not `noeviction`, suffixed with its address.
 */
export async function readEvictionPolicy(redis: RedisConnection): Promise<string> {
  const policies = await Promise.all(
    allNodes(redis).map(async (node) => {
      const reply = (await node.config('GET', 'maxmemory-policy')) as string[];
      return { node, policy: reply[1] ?? 'unknown' };
    }),
  );
  if (policies.length === 0) return 'unknown';
  const bad = policies.find((entry) => entry.policy !== 'noeviction');
  if (bad === undefined) return 'noeviction';
  return isCluster(redis) ? `${bad.policy} (${nodeAddress(bad.node)})` : bad.policy;
}

export interface ConnectOptions {
  readonly connectionName?: string;
  /**
   * `off` skips the eviction-policy check (REDIS_EVICTION_CHECK): managed Redis services may refuse
   * `CONFIG GET`. Skipping is logged, as nothing then guards against an evicting policy.
   */
  readonly evictionCheck?: 'on' | 'off';
  /** The process' logger: connection errors, and the skipped check (default: {@link defaultLogger}). */
  readonly logger?: Pick<LogSink, 'error' | 'warn' | 'info'>;
}

/** What {@link connectRedisFromConfig} needs of the configuration. */
export interface RedisTarget {
  readonly REDIS_URL: string;
  readonly REDIS_CLUSTER_NODES?: readonly ClusterNode[] | undefined;
  readonly REDIS_EVICTION_CHECK?: 'on' | 'off';
}

async function ensureNoEviction(redis: RedisConnection, options: ConnectOptions): Promise<void> {
  if (options.evictionCheck === 'off') {
    (options.logger ?? defaultLogger()).warn(
      `redis(${options.connectionName ?? 'card-poller'}): maxmemory-policy check skipped (REDIS_EVICTION_CHECK=off); the policy must be "noeviction" or leases and due scores may be evicted`,
    );
    return;
  }
  let policy: string;
  try {
    policy = await readEvictionPolicy(redis);
  } catch (error) {
    // CONFIG refused (NOPERM, unknown command): close, or the connection would keep the process alive.
    redis.disconnect();
    throw error;
  }
  if (policy !== 'noeviction') {
    redis.disconnect();
    throw new RedisEvictionPolicyError(policy);
  }
}

/**
 * Connects, or throws when the server cannot be reached now. Once connected, the connection
 * outlives Redis outages: ioredis reconnects by itself (its default retry strategy: every ≤ 2 s,
 * for ever), commands meanwhile fail with an error their caller handles, and the outage is logged
 * through the process' logger, rate-limited (see src/runtime/connectionErrors.ts).
 */
export async function connectRedis(url: string, options: ConnectOptions = {}): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectionName: options.connectionName,
    // Commands wait for a reconnect instead of failing at once; activities have their own timeouts.
    maxRetriesPerRequest: 3,
    // Commands issued in the same tick go out as one pipeline: many concurrent activities share
    // this connection, and one write per batch instead of one per command saves round trips.
    enableAutoPipelining: true,
  });
  const errors = logConnectionErrors(redis, `redis(${options.connectionName ?? 'card-poller'})`, { logger: options.logger });
  redis.on('ready', () => errors.recovered());
  try {
    await redis.connect();
  } catch (error) {
    // Without this the failed connection would keep reconnecting (and logging) in the background.
    redis.disconnect();
    throw error;
  }
  await ensureNoEviction(redis, options);
  return redis;
}

/**
 * Connects to a Redis Cluster through any of `nodes` (the rest is discovered). Same contract as
 * {@link connectRedis}: the connection outlives a node's outage. When a master dies, commands
 * for its slots are retried (every 300 ms, up to 16 redirections) while its replica is promoted,
 * and ioredis re-reads the slot map on the redirection, so callers see at most the failover time
 * (cluster-node-timeout + election) as slower or failed commands.
 */
export async function connectRedisCluster(nodes: readonly ClusterNode[], options: ConnectOptions = {}): Promise<Cluster> {
  const label = `redis-cluster(${options.connectionName ?? 'card-poller'})`;
  const cluster = new Cluster(
    nodes.map((node) => ({ host: node.host, port: node.port })),
    {
      lazyConnect: true,
      enableAutoPipelining: true,
      // Keep trying for ever, like the single connection: a whole-cluster outage is waited out.
      clusterRetryStrategy: (times) => Math.min(100 * times, 2000),
      retryDelayOnFailover: 300,
      retryDelayOnClusterDown: 300,
      retryDelayOnTryAgain: 300,
      redisOptions: { connectionName: options.connectionName, maxRetriesPerRequest: 3 },
    },
  );
  const errors = logConnectionErrors(cluster, label, { logger: options.logger });
  // A node's errors arrive as 'node error', not 'error': log them alike (one node down is an outage too).
  cluster.on('node error', (error: unknown) => errors.error(error));
  cluster.on('ready', () => errors.recovered());
  try {
    await cluster.connect();
  } catch (error) {
    cluster.disconnect();
    throw error;
  }
  await ensureNoEviction(cluster, options);
  return cluster;
}

/** The process' Redis connection as configured: a cluster when REDIS_CLUSTER_NODES is set, else REDIS_URL. */
export async function connectRedisFromConfig(config: RedisTarget, options: ConnectOptions = {}): Promise<RedisConnection> {
  const nodes = config.REDIS_CLUSTER_NODES;
  const connect: ConnectOptions = config.REDIS_EVICTION_CHECK === undefined ? options : { evictionCheck: config.REDIS_EVICTION_CHECK, ...options };
  return nodes !== undefined && nodes.length > 0 ? connectRedisCluster(nodes, connect) : connectRedis(config.REDIS_URL, connect);
}
