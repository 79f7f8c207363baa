/**
 * Settings for managed services (src/runtime/deps.ts, src/redis/connect.ts): the PostgreSQL pool
 * size comes from DATABASE_POOL_SIZE, and REDIS_EVICTION_CHECK=off connects to a Redis that
 * refuses `CONFIG` (as managed services do), saying that the check was skipped.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { loadConfig } from '../../src/config/index.js';
import { connectRedisFromConfig } from '../../src/redis/connect.js';
import { createRuntimeDeps } from '../../src/runtime/deps.js';
import { createTestRedis } from '../../testkit/redis.js';
import { captureLogs } from '../../testkit/logs.js';

test('the PostgreSQL pool holds DATABASE_POOL_SIZE connections at most', async () => {
  const deps = await createRuntimeDeps(loadConfig({ ...process.env, DATABASE_POOL_SIZE: '3', LOG_LEVEL: 'silent' }), { name: 'test-pool-size' });
  try {
    assert.equal(deps.pool.options.max, 3);
  } finally {
    await deps.close();
  }
});

test(
  'REDIS_EVICTION_CHECK=off connects where CONFIG is refused, and logs that the check was skipped',
  { skip: process.env.REDIS_CLUSTER_NODES ? 'single Redis only' : false },
  async () => {
    const admin = await createTestRedis('eviction-skip');
    // A user without CONFIG, like the accounts of managed Redis services.
    const user = `test-noconfig-${randomUUID().slice(0, 8)}`;
    const password = randomUUID();
    await admin.redis.call('ACL', 'SETUSER', user, 'on', `>${password}`, '~*', '&*', '+@all', '-config');
    try {
      const url = new URL(loadConfig().REDIS_URL);
      url.username = user;
      url.password = password;
      const target = { ...loadConfig(), REDIS_URL: url.toString() };
      await assert.rejects(connectRedisFromConfig({ ...target, REDIS_EVICTION_CHECK: 'on' }, { connectionName: 'test-eviction-on' }), /NOPERM/);

      const logs = captureLogs();
      const redis = await connectRedisFromConfig({ ...target, REDIS_EVICTION_CHECK: 'off' }, { connectionName: 'test-eviction-off', logger: logs.logger });
      try {
        assert.equal(await redis.ping(), 'PONG');
        const lines = logs.lines();
        assert.deepEqual(
          lines.map((line) => line.level),
          ['warn'],
        );
        assert.match(lines[0]!.msg, /maxmemory-policy check skipped \(REDIS_EVICTION_CHECK=off\)/);
      } finally {
        redis.disconnect();
      }
    } finally {
      await admin.redis.call('ACL', 'DELUSER', user);
      await admin.close();
    }
  },
);
