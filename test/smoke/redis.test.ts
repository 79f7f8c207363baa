import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestRedis } from '../../testkit/redis.js';
import { readEvictionPolicy } from '../../src/redis/connect.js';

test('redis: round trip through the real server and noeviction policy', async () => {
  const { redis, namespace, close } = await createTestRedis('smoke');
  try {
    const key = `${namespace}hello`;
    await redis.set(key, 'world', 'PX', 10_000);
    assert.equal(await redis.get(key), 'world');
    const ttl = await redis.pttl(key);
    assert.ok(ttl > 0 && ttl <= 10_000, `ttl ${ttl} should be set by the server`);
    assert.equal(await readEvictionPolicy(redis), 'noeviction');
  } finally {
    await close();
  }
});
