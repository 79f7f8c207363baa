/**
 * What differs on a Redis Cluster (src/redis/connection.ts, connect.ts): the connection is a
 * Cluster, accounts spread over the masters, batches across accounts go out per slot, scripts load
 * per node (NOSCRIPT after a SCRIPT FLUSH is answered by EVAL on the owning node), SCAN and the
 * eviction-policy check cover every node.
 */
import './env.js';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/index.js';
import { connectRedisFromConfig, readEvictionPolicy, RedisEvictionPolicyError } from '../../src/redis/connect.js';
import { allNodes, isCluster, masterNodes, nodeAddress } from '../../src/redis/connection.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { keySlot } from '../../src/redis/slot.js';
import { createTestRedis, deleteMatching, scanKeys, type TestRedis } from '../../testkit/redis.js';

const ACCOUNTS = Array.from({ length: 30 }, (_, i) => String(i + 1));
const NOW = 1_800_000_000_000;

let t: TestRedis;
let store: CarrierQueueStore;

before(async () => {
  t = await createTestRedis('cluster-connection');
  store = new CarrierQueueStore(t.redis, t.namespace);
});
after(async () => {
  await t.close();
});

/** The master serving a key's slot, as `host:port`. */
function ownerOf(key: string): string {
  assert.ok(isCluster(t.redis));
  const owner = t.redis.slots[keySlot(key)]?.[0];
  assert.ok(owner, `no node serves slot ${keySlot(key)}`);
  return owner;
}

test('the configured connection is a cluster of 3 masters and 3 replicas', () => {
  assert.ok(isCluster(t.redis), 'REDIS_CLUSTER_NODES set: a Cluster connection');
  assert.equal(masterNodes(t.redis).length, 3);
  assert.equal(allNodes(t.redis).length, 6);
});

test('accounts spread over every master; a batch across accounts (upsertMany/removeMany) goes out per slot', async () => {
  const cards = ACCOUNTS.flatMap((carrierId) => ['a', 'b', 'c'].map((cardId) => ({ carrierId, cardId, now: NOW, dues: { card_status: NOW - 1 } })));
  await store.upsertMany(cards);
  const owners = new Set(ACCOUNTS.map((carrierId) => ownerOf(store.keys(carrierId).queue)));
  assert.equal(owners.size, 3, `accounts on ${[...owners].join(', ')}`);
  for (const carrierId of ACCOUNTS) assert.deepEqual(await store.depths(carrierId), { priority: 0, normal: 3, running: 0 });
  // SCAN per master finds every account's lane; one node alone would not.
  const lanes = new Set<string>();
  for await (const keys of scanKeys(t.redis, `${t.namespace}*:queue`)) for (const key of keys) lanes.add(key);
  assert.equal(lanes.size, ACCOUNTS.length);
  const removed = await store.removeMany(ACCOUNTS.map((carrierId) => ({ carrierId, cardId: 'c' })));
  assert.equal(removed, ACCOUNTS.length);
  assert.deepEqual(await store.depths('7'), { priority: 0, normal: 2, running: 0 });
});

test('scripts load per node: after SCRIPT FLUSH on every master the next calls (pipelined or not) fall back to EVAL on the owning node', async () => {
  await store.upsertMany(ACCOUNTS.map((carrierId) => ({ carrierId, cardId: 'e', now: NOW, dues: { card_status: NOW + 60_000 } })));
  await Promise.all(masterNodes(t.redis).map((node) => node.script('FLUSH')));
  await store.upsertMany(ACCOUNTS.map((carrierId) => ({ carrierId, cardId: 'f', now: NOW, dues: { card_status: NOW - 1 } })));
  await Promise.all(masterNodes(t.redis).map((node) => node.script('FLUSH')));
  for (const carrierId of ACCOUNTS) {
    const { claimed } = await store.claim({
      carrierId,
      now: NOW,
      leaseMs: 10_000,
      inflightLimit: 10,
      priorityRatio: 0,
      tokenPrefix: `f${carrierId}`,
      typeGroups: {},
      countRealname: false,
    });
    assert.ok(
      claimed.some((card) => card.cardId === 'f'),
      `account ${carrierId} claimed its card`,
    );
  }
});

test('deleteMatching clears a namespace on every master', async () => {
  const scratch = `${t.namespace}scratch:`;
  await Promise.all(ACCOUNTS.map((carrierId) => t.redis.set(`${scratch}{c${carrierId}}:x`, '1')));
  assert.equal(await deleteMatching(t.redis, `${scratch}*`), ACCOUNTS.length);
  let left = 0;
  for await (const keys of scanKeys(t.redis, `${scratch}*`)) left += keys.length;
  assert.equal(left, 0);
});

test('TIME answers from any node agree with this host (one host: one clock)', async () => {
  const times = await Promise.all(
    allNodes(t.redis).map(async (node) => {
      const [seconds, micros] = await node.time();
      return Number(seconds) * 1000 + Number(micros) / 1000;
    }),
  );
  const spread = Math.max(...times) - Math.min(...times);
  assert.ok(spread < 1000, `node clocks spread ${spread} ms`);
  assert.ok(Math.abs((await new CarrierQueueStore(t.redis, t.namespace, { clock: 'redis' }).clockNow()) - Date.now()) < 1000);
});

test('the eviction-policy check covers every node: one replica with allkeys-lru is refused, naming it', async () => {
  assert.equal(await readEvictionPolicy(t.redis), 'noeviction');
  const replica = allNodes(t.redis).find((node) => !masterNodes(t.redis).includes(node));
  assert.ok(replica, 'a replica');
  await replica.config('SET', 'maxmemory-policy', 'allkeys-lru');
  try {
    assert.equal(await readEvictionPolicy(t.redis), `allkeys-lru (${nodeAddress(replica)})`);
    await assert.rejects(
      connectRedisFromConfig(loadConfig(), { connectionName: 'test-eviction' }),
      (error: unknown) => error instanceof RedisEvictionPolicyError && error.message.includes(nodeAddress(replica)),
    );
  } finally {
    await replica.config('SET', 'maxmemory-policy', 'noeviction');
  }
  assert.equal(await readEvictionPolicy(t.redis), 'noeviction');
});
