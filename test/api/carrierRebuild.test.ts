/**
 * Carrier changes answer once the row is written, not after the reconcile they cause (which can
 * run a whole rebuild of Redis); the account's status tells how far a rebuild has come.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { requestRebuild } from '../../src/lifecycle/rebuild.js';
import { globalKeys } from '../../src/redis/keys.js';
import type { UpsertInput } from '../../src/redis/carrierQueueStore.js';
import { carrierBody, createApiStack, iccid, type ApiStack } from './helpers.js';

interface RebuildView {
  readonly state: string;
  readonly cardsDone: number;
  readonly cardsTotal: number;
}

let api: ApiStack;
before(async () => {
  api = await createApiStack('api-rebuild');
});
after(async () => {
  await api.close();
});

function gate(): { promise: Promise<void>; open: () => void } {
  let open = (): void => undefined;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function rebuildView(carrierId: string): Promise<RebuildView | undefined> {
  const { status, body } = await api.call<{ rebuild?: RebuildView }>('GET', `/v1/carriers/${carrierId}/status`);
  assert.equal(status, 200);
  return body.rebuild;
}

test('POST and PATCH /v1/carriers answer while the reconcile they cause is stuck in a rebuild', async () => {
  const rebuilding = gate();
  let rebuildCalls = 0;
  const guard = api.stack.services.redisGuard;
  const ensureIntact = guard.ensureIntact.bind(guard);
  // pollingControl's reconcile first makes sure Redis holds its data: here that "rebuild" never ends until the test says so.
  api.stack.services.redisGuard.ensureIntact = async () => {
    rebuildCalls += 1;
    await rebuilding.promise;
    return false;
  };
  const workers = await api.stack.startWorkers(['control']);
  try {
    await ensurePollingControl(api.ref, { reconcileEveryMs: 600_000 });
    await until('pollingControl to be inside its first rebuild', () => rebuildCalls >= 1);

    let answered = false;
    const created = api.call('POST', '/v1/carriers', carrierBody('while-rebuilding')).finally(() => (answered = true));
    // Generous bound: only an answer that waits for the rebuild (held until the finally below) takes this long.
    await until('POST /v1/carriers to answer while the rebuild runs', () => answered, 30_000).catch(() => undefined);
    assert.ok(answered, 'POST /v1/carriers did not answer while the rebuild was running (it waits on the reconcile)');
    const { status, body } = await created;
    assert.equal(status, 201);

    let patchAnswered = false;
    const patched = api.call('PATCH', `/v1/carriers/${String(body.id)}`, { enabled: false }).finally(() => (patchAnswered = true));
    await until('PATCH /v1/carriers/:id to answer while the rebuild runs', () => patchAnswered, 30_000).catch(() => undefined);
    assert.ok(patchAnswered, 'PATCH /v1/carriers/:id did not answer while the rebuild was running');
    assert.equal((await patched).status, 200);
  } finally {
    rebuilding.open();
    await workers.stop();
    guard.ensureIntact = ensureIntact;
  }
});

test("the account's status shows a rebuild's progress: pending after Redis lost the cards, running with the cards done so far, idle when complete", async () => {
  const { deps, redis, services } = api.stack;
  const carrierId = String((await api.call('POST', '/v1/carriers', carrierBody('progress'))).body.id);
  await api.call('POST', '/v1/polling-configs', { name: 'progress', match: { carrierId }, intervalsSec: { card_status: 3600 } });
  const cards = Array.from({ length: 5 }, (_, i) => ({ iccid: iccid(i, '8955'), carrierId }));
  assert.equal((await api.call('POST', '/v1/cards/import', cards)).body.accepted, 5);
  // Not polled: not part of the total.
  await api.call('POST', '/v1/cards', { iccid: iccid(99, '8955'), carrierId, enablePolling: false });
  const marker = globalKeys(redis.namespace).rebuiltMarker;
  await deps.redis.set(marker, new Date().toISOString());
  // The polling-config change re-places the cards in the background (a rebuild of its own): a
  // request made now joins it and resolves once no rebuild of this process runs.
  await requestRebuild({ pool: deps.pool, redis: deps.redis, store: deps.store, namespace: redis.namespace });
  assert.deepEqual(await rebuildView(carrierId), { state: 'idle', cardsDone: 5, cardsTotal: 5 });

  // Redis loses the account's cards and the marker, as a flush would.
  const ids = (await deps.pool.query<{ id: string }>('SELECT id::text FROM iot_card WHERE carrier_id = $1::bigint', [carrierId])).rows.map((row) => row.id);
  await deps.store.removeMany(ids.map((cardId) => ({ carrierId, cardId })));
  await deps.redis.del(marker);
  assert.deepEqual(await rebuildView(carrierId), { state: 'pending', cardsDone: 0, cardsTotal: 5 });

  // The rebuild pollingControl runs (the Redis guard) gets two of the account's cards written, then waits.
  const paused = gate();
  const store = deps.store;
  const upsertMany = store.upsertMany.bind(store);
  let halfway = false;
  store.upsertMany = async (inputs: readonly UpsertInput[]) => {
    if (halfway || !inputs.some((input) => input.carrierId === carrierId)) return upsertMany(inputs);
    await upsertMany(inputs.slice(0, 2));
    halfway = true;
    await paused.promise;
    return upsertMany(inputs.slice(2));
  };
  try {
    const done = services.redisGuard.ensureIntact();
    await until('two of its cards to be written', () => halfway);
    const running = await rebuildView(carrierId);
    assert.equal(running?.state, 'running', JSON.stringify(running));
    assert.equal(running.cardsTotal, 5);
    assert.equal(running.cardsDone, 2);
    paused.open();
    assert.equal(await done, true);
  } finally {
    paused.open();
    store.upsertMany = upsertMany;
  }
  assert.deepEqual(await rebuildView(carrierId), { state: 'idle', cardsDone: 5, cardsTotal: 5 });
});
