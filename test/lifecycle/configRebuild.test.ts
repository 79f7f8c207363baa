/**
 * A polling-config change made while a rebuild runs must still be applied (docs/design.md, 'Rebuild
 * and the Redis-flush guard': requestRebuild). The running rebuild read the configuration before
 * the change, so one more pass has to follow it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { createApiStack, carrierBody, iccid } from '../api/helpers.js';
import { waitFor } from '../../testkit/seed.js';
import { globalKeys } from '../../src/redis/keys.js';

test('a polling config change during a running rebuild is applied once that rebuild ends', async () => {
  const api = await createApiStack('cfg-during-rebuild');
  try {
    const carrier = await api.call<{ id: string }>('POST', '/v1/carriers', carrierBody('cfgdr'));
    const config = await api.call<{ id: string }>('POST', '/v1/polling-configs', {
      name: 'base',
      priority: 1,
      match: { carrierId: carrier.body.id },
      intervalsSec: { card_status: 600 },
    });
    const card = await api.call<{ id: string }>('POST', '/v1/cards', { iccid: iccid(8101), carrierId: carrier.body.id, status: 'active', enablePolling: true });
    assert.equal(card.status, 201);
    // Let the rebuild the config creation started finish.
    const lockKey = globalKeys(api.stack.config.REDIS_KEY_PREFIX).rebuildLock;
    await waitFor('first rebuild done', async () => (await api.stack.redis.redis.exists(lockKey)) === 0, 10_000, 50);
    await sleep(300);

    // Another rebuild is running (it read the configuration before the change below).
    const before = await api.stack.deps.store.readDue(carrier.body.id, card.body.id);
    assert.ok(before?.types.card_status.due != null, 'the card is due for card_status');
    await api.stack.redis.redis.set(lockKey, 'another-rebuild', 'PX', 30_000);
    const patched = await api.call('PATCH', `/v1/polling-configs/${config.body.id}`, { intervalsSec: { carddata: 300 } });
    assert.equal(patched.status, 200);
    // The change's rebuild request is registered (its flag raised in Redis, src/lifecycle/rebuild.ts)
    // and waits for the lock: until that rebuild ends, nothing of the card's state moves.
    await waitFor('the rebuild request waiting', async () => (await api.stack.redis.redis.exists(`${lockKey}:again`)) === 1, 10_000, 20);
    assert.deepEqual(await api.stack.deps.store.readDue(carrier.body.id, card.body.id), before, 'nothing applied while the other rebuild holds the lock');
    // That rebuild ends; the change it did not see must be applied by one more pass.
    const released = Date.now();
    await api.stack.redis.redis.del(lockKey);
    const after = await waitFor(
      'config change applied after the running rebuild',
      async () => {
        const state = await api.stack.deps.store.readDue(carrier.body.id, card.body.id);
        return state?.types.carddata.due != null && state.types.card_status.due === null ? state : undefined;
      },
      10_000,
    );
    // The new type's first due falls within its interval (jittered from the pass on), the old type is gone.
    const due = after.types.carddata.due ?? 0;
    assert.ok(due >= released - 1000 && due <= Date.now() + 300_000, `carddata due within its 300 s interval: ${due - released} ms after the release`);
    assert.equal(await api.stack.redis.redis.exists(`${lockKey}:again`), 0, 'the request served: its flag cleared');
  } finally {
    await api.close();
  }
});
