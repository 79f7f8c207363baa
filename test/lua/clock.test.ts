/**
 * One clock (docs/design.md, 'Leases, claims, one clock'): the processes' store runs on Redis'
 * clock, so a host whose own clock is off neither claims early, nor schedules from a wrong "now",
 * nor stamps a request on another timeline than the finish that may serve it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/index.js';
import { createRuntimeDeps } from '../../src/runtime/deps.js';
import { createTestRedis } from '../../testkit/redis.js';
import { storeClock } from '../../src/lifecycle/queueStore.js';

test('the runtime store reads Redis TIME, whatever the process clock says', async () => {
  const scratch = await createTestRedis('clock');
  const deps = await createRuntimeDeps(loadConfig(), { namespace: scratch.namespace, name: 'test-clock' });
  const realNow = Date.now;
  try {
    const [seconds, micros] = await scratch.redis.time();
    const redisNow = Number(seconds) * 1000 + Number(micros) / 1000;
    // This host's clock runs an hour ahead.
    Date.now = () => realNow() + 3_600_000;
    const storeNow = await deps.store.clockNow();
    assert.ok(Math.abs(storeNow - redisNow) < 1000, `store clock ${storeNow} vs Redis ${redisNow}`);
    // A card due in 30 minutes by Redis' clock is not due, although the skewed host thinks it is.
    await deps.store.upsert({ carrierId: '1', cardId: 'k1', now: redisNow, dues: { card_status: redisNow + 1_800_000 } });
    assert.equal(await deps.store.dueNowCount('1'), 0);
    const claimed = await deps.store.claim({
      carrierId: '1',
      leaseMs: 10_000,
      inflightLimit: 10,
      priorityRatio: 0,
      tokenPrefix: 'clock.1',
      typeGroups: {},
      countRealname: false,
    });
    assert.equal(claimed.claimed.length, 0, 'claimed a card that is not due on the shared clock');
  } finally {
    Date.now = realNow;
    await deps.close();
    await scratch.close();
  }
});

test('lifecycle and rebuild write due times on the store clock: storeClock follows Redis TIME, not the process clock', async () => {
  const scratch = await createTestRedis('clock-lifecycle');
  const deps = await createRuntimeDeps(loadConfig(), { namespace: scratch.namespace, name: 'test-clock-lifecycle' });
  const realNow = Date.now;
  try {
    Date.now = () => realNow() - 7_200_000;
    const now = await storeClock(deps.store);
    const [seconds, micros] = await scratch.redis.time();
    const redisNow = Number(seconds) * 1000 + Number(micros) / 1000;
    assert.ok(Math.abs(now() - redisNow) < 1000, `store clock ${now()} vs Redis ${redisNow} (host two hours behind)`);
  } finally {
    Date.now = realNow;
    await deps.close();
    await scratch.close();
  }
});
