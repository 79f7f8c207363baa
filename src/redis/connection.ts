/**
 * "Our Redis connection": one server (ioredis `Redis`) or a Redis Cluster (ioredis `Cluster`, when
 * REDIS_CLUSTER_NODES is set). Both expose the same command methods, so code that sends keyed
 * commands, scripts, pipelines or MULTI over one account's keys (one hash tag, one slot) takes a
 * {@link RedisConnection} and works on either. What differs is here:
 *
 * - Keyless server commands (SCAN, INFO, CONFIG, FLUSHDB) go to one node of a cluster: use
 *   {@link masterNodes} / {@link allNodes} and ask each.
 * - Multi-key commands, MULTI and pipelines must stay within one slot on a cluster (ioredis sends a
 *   whole pipeline to one node); {@link groupBySlot} splits a batch across accounts.
 * - TIME goes to any node of a cluster. The one-clock rule (docs/design.md, 'Leases, claims, one
 *   clock') then assumes the nodes' clocks agree: true for nodes on one host, and within NTP
 *   accuracy (ms) for NTP-synced hosts, far below the ±1.5 s skew the model test shows to matter.
 */
import { Cluster, type Redis } from 'ioredis';
import { keySlot } from './slot.js';

export type RedisConnection = Redis | Cluster;

export function isCluster(connection: RedisConnection): connection is Cluster {
  return connection instanceof Cluster;
}

/** The servers that hold data: every master of a cluster, or the one server. */
export function masterNodes(connection: RedisConnection): Redis[] {
  return isCluster(connection) ? connection.nodes('master') : [connection];
}

/** Every server: masters and replicas of a cluster (a replica may be promoted), or the one server. */
export function allNodes(connection: RedisConnection): Redis[] {
  return isCluster(connection) ? connection.nodes('all') : [connection];
}

/** `host:port` of a node, for messages. */
export function nodeAddress(node: Redis): string {
  return `${node.options.host ?? '?'}:${String(node.options.port ?? '?')}`;
}

/**
 * Splits items into batches a pipeline may carry on a cluster: one per slot (ioredis refuses a
 * pipeline whose keys live on different nodes). Done on a single server too, so both run the same
 * batches and test/lua/slots.test.ts checks the path the cluster takes. Order within a batch is kept.
 */
export function groupBySlot<T>(items: readonly T[], keyOf: (item: T) => string): T[][] {
  const bySlot = new Map<number, T[]>();
  for (const item of items) {
    const slot = keySlot(keyOf(item));
    const batch = bySlot.get(slot);
    if (batch) batch.push(item);
    else bySlot.set(slot, [item]);
  }
  return [...bySlot.values()];
}
