import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createApiStack, carrierBody, iccid } from './helpers.js';
import { waitFor } from '../../testkit/seed.js';

test('a polling config change re-places existing cards in Redis: a type gaining an interval becomes due, one losing it leaves', async () => {
  const api = await createApiStack('api-config-resync');
  try {
    const carrier = await api.call<{ id: string }>('POST', '/v1/carriers', carrierBody('resync'));
    assert.equal(carrier.status, 201);
    const config = await api.call<{ id: string }>('POST', '/v1/polling-configs', {
      name: 'base',
      priority: 1,
      match: { carrierId: carrier.body.id },
      intervalsSec: { card_status: 600 },
    });
    assert.equal(config.status, 201);
    const card = await api.call<{ id: string }>('POST', '/v1/cards', { iccid: iccid(7), carrierId: carrier.body.id, status: 'active', enablePolling: true });
    assert.equal(card.status, 201);
    const before = await api.stack.deps.store.readDue(carrier.body.id, card.body.id);
    assert.ok(before?.types.card_status.due !== null && before?.types.carddata.due === null);

    const patched = await api.call('PATCH', `/v1/polling-configs/${config.body.id}`, { intervalsSec: { carddata: 300 } });
    assert.equal(patched.status, 200);
    const after = await waitFor(
      'cards re-placed',
      async () => {
        const state = await api.stack.deps.store.readDue(carrier.body.id, card.body.id);
        return state?.types.carddata.due != null && state.types.card_status.due === null ? state : undefined;
      },
      15_000,
    );
    // New type: due within its jitter window max(300 s / 10, 2 s) of now.
    assert.ok((after.types.carddata.due ?? 0) <= Date.now() + 30_000);
    assert.equal(await api.stack.deps.store.laneOf(carrier.body.id, card.body.id), 'normal');
  } finally {
    await api.close();
  }
});
