/**
 * requestCheck, upsert and remove (docs/design.md, 'Lua scripts'): one case per branch.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createFixture, CLAIM_DEFAULTS, type Fixture, tokenOf } from './fixture.js';
import { callScript } from '../../src/redis/scriptLoader.js';
import { upsertCall } from '../../src/redis/carrierScripts.js';
import { expectCode, ScriptArgumentError, InvalidStoreInputError } from '../../src/redis/storeErrors.js';
import type { RequestCheckInput } from '../../src/redis/carrierQueueStore.js';

const NOW = 4_000_000;
/** A token of a claim made at `at` (NOW unless said). */
const tok = (prefix: string, cardId: string, at = NOW): string => tokenOf(prefix, cardId, at);
let fx: Fixture;
let carrier = 300;

before(async () => {
  fx = await createFixture('lua-request');
});
after(async () => {
  await fx.close();
});

async function polled(dues: Record<string, number> = { card_status: NOW + 60_000, carddata: NOW + 90_000 }): Promise<number> {
  carrier += 1;
  await fx.store.upsert({ carrierId: carrier, cardId: 'a', now: NOW, dues });
  return carrier;
}

function request(c: number, over: Partial<RequestCheckInput> = {}) {
  return fx.store.requestCheck({ carrierId: c, cardId: 'a', now: NOW, cooldownMs: 0, lane: 'priority', types: ['card_status'], ...over });
}

describe('requestCheck', () => {
  test('card in no lane → not_polled, nothing written', async () => {
    carrier += 1;
    assert.deepEqual(await request(carrier), { status: 'not_polled' });
    assert.equal(await fx.redis.exists(fx.keys(carrier).due('a')), 0);
  });

  test('priority, not claimed: due:t = req:t = now, prio = 1, moved to the priority lane at now', async () => {
    const c = await polled();
    assert.deepEqual(await request(c, { types: ['card_status', 'carddata'] }), { status: 'requested', requested: 2 });
    const state = await fx.store.readDue(c, 'a');
    assert.equal(state?.types.card_status.due, NOW);
    assert.equal(state?.types.carddata.req, NOW);
    assert.equal(state?.prio, true);
    assert.equal(await fx.score(c, 'prio', 'a'), NOW);
    assert.equal(await fx.score(c, 'queue', 'a'), null);
  });

  test('priority keeps an earlier (overdue) score', async () => {
    const c = await polled({ card_status: NOW - 500 });
    await request(c);
    assert.equal(await fx.score(c, 'prio', 'a'), NOW - 500);
  });

  test('cooldown: a type that succeeded within the cooldown is skipped; all skipped → cooldown, no move', async () => {
    const c = await polled();
    await fx.redis.hset(fx.keys(c).due('a'), 'ok:card_status', String(NOW - 1_000));
    assert.deepEqual(await request(c, { cooldownMs: 5_000 }), { status: 'cooldown', requested: 0 });
    assert.equal(await fx.store.laneOf(c, 'a'), 'normal');
    assert.equal((await fx.store.readDue(c, 'a'))?.prio, false);
    assert.deepEqual(await request(c, { cooldownMs: 5_000, types: ['card_status', 'carddata'] }), { status: 'requested', requested: 1 });
    assert.deepEqual(await request(c, { cooldownMs: 500 }), { status: 'requested', requested: 1 }, 'cooldown elapsed');
  });

  test('confirmation delays set cfm/exp; without expected exp is deleted; without delays both untouched', async () => {
    const c = await polled();
    await request(c, { confirmDelaysSec: [10, 30, 60], expected: 'offline' });
    let state = await fx.store.readDue(c, 'a');
    assert.deepEqual(state?.types.card_status.cfm, [10, 30, 60]);
    assert.equal(state?.types.card_status.exp, 'offline');
    await request(c);
    state = await fx.store.readDue(c, 'a');
    assert.deepEqual(state?.types.card_status.cfm, [10, 30, 60]);
    await request(c, { confirmDelaysSec: [5] });
    state = await fx.store.readDue(c, 'a');
    assert.deepEqual(state?.types.card_status.cfm, [5]);
    assert.equal(state?.types.card_status.exp, null);
  });

  test('priority while claimed: prio = 1, card stays where it is (finish moves it)', async () => {
    const c = await polled({ card_status: NOW - 1 });
    await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW });
    await request(c, { now: NOW + 10 });
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + CLAIM_DEFAULTS.leaseMs);
    assert.equal((await fx.store.readDue(c, 'a'))?.prio, true);
  });

  test('claim whose lease expired by now counts as not claimed', async () => {
    const c = await polled({ card_status: NOW - 1 });
    await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW });
    await request(c, { now: NOW + CLAIM_DEFAULTS.leaseMs });
    assert.equal(await fx.score(c, 'prio', 'a'), NOW + CLAIM_DEFAULTS.leaseMs);
  });

  test('normal lane, not claimed: scored now in its own lane, no prio', async () => {
    const c = await polled();
    assert.deepEqual(await request(c, { lane: 'normal' }), { status: 'requested', requested: 1 });
    assert.equal(await fx.score(c, 'queue', 'a'), NOW);
    assert.equal((await fx.store.readDue(c, 'a'))?.prio, false);
    const c2 = await polled();
    await request(c2, { now: NOW + 5 });
    await request(c2, { lane: 'normal', now: NOW + 9 });
    assert.equal(await fx.score(c2, 'prio', 'a'), NOW + 5, 'stays in the priority lane, never later');
  });

  test('normal lane, overdue card keeps its earlier score', async () => {
    const c = await polled({ card_status: NOW - 700 });
    await request(c, { lane: 'normal' });
    assert.equal(await fx.score(c, 'queue', 'a'), NOW - 700);
  });

  test('normal lane while claimed: due written, lane untouched', async () => {
    const c = await polled({ card_status: NOW - 1 });
    await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW });
    await request(c, { lane: 'normal', types: ['carddata'], now: NOW + 10 });
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + CLAIM_DEFAULTS.leaseMs);
    assert.equal((await fx.store.readDue(c, 'a'))?.types.carddata.due, NOW + 10);
  });

  test('no types → store refuses', async () => {
    const c = await polled();
    await assert.rejects(request(c, { types: [] }), InvalidStoreInputError);
  });
});

describe('upsert', () => {
  test('new card: carrier, dues, normal lane scored by earliest due', async () => {
    const c = await polled({ card_status: NOW + 5, package: NOW + 3 });
    const state = await fx.store.readDue(c, 'a');
    assert.equal(state?.carrier, String(c));
    assert.equal(state?.types.package.due, NOW + 3);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 3);
  });

  test('other types deleted with their pending requests; other fields kept', async () => {
    const c = await polled({ card_status: NOW + 5, carddata: NOW + 6 });
    await request(c, { types: ['carddata'], lane: 'normal' });
    await fx.redis.hset(fx.keys(c).due('a'), 'ok:carddata', '7');
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW + 50 } });
    const state = await fx.store.readDue(c, 'a');
    assert.equal(state?.types.carddata.due, null);
    assert.equal(state?.types.carddata.req, null);
    assert.equal(state?.types.carddata.ok, 7);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 50);
  });

  test('card in the priority lane stays there', async () => {
    const c = await polled();
    await request(c);
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW + 50 } });
    assert.equal(await fx.store.laneOf(c, 'a'), 'priority');
  });

  test('pending request keeps due:t ≤ req:t (I5)', async () => {
    const c = await polled();
    await request(c, { now: NOW + 10, lane: 'normal' });
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW + 20, dues: { card_status: NOW + 99_999 } });
    assert.equal((await fx.store.readDue(c, 'a'))?.types.card_status.due, NOW + 10);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 10);
  });

  test('claimed card: score not lowered below the lease expiry', async () => {
    const c = await polled({ card_status: NOW - 1 });
    await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW });
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW + 1, dues: { card_status: NOW - 1 } });
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + CLAIM_DEFAULTS.leaseMs);
  });

  test('no types → removed (lanes and hash)', async () => {
    const c = await polled();
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: {} });
    assert.equal(await fx.store.laneOf(c, 'a'), null);
    assert.equal(await fx.redis.exists(fx.keys(c).due('a')), 0);
  });

  test('invalid arguments → -2; bad card id refused by the store', async () => {
    const c = await polled();
    const call = upsertCall(fx.keys(c), { carrierId: String(c), cardId: 'a', now: NOW, dues: { card_status: 1 } });
    const args = [...call.args];
    args[4] = 'not-a-number';
    assert.throws(() => expectCode('upsert', null, []));
    const reply = await callScript(fx.redis, call.name, call.keys, args);
    assert.throws(() => expectCode('upsert', reply, []), ScriptArgumentError);
    await assert.rejects(fx.store.upsert({ carrierId: c, cardId: 'a:b', now: NOW, dues: { card_status: 1 } }), InvalidStoreInputError);
  });

  test('upsertMany / removeMany in one pipeline', async () => {
    carrier += 1;
    const c = carrier;
    await fx.store.upsertMany(['x', 'y', 'z'].map((cardId, i) => ({ carrierId: c, cardId, now: NOW, dues: { card_status: NOW + i } })));
    assert.deepEqual(await fx.store.depths(c), { priority: 0, normal: 3, running: 0 });
    assert.equal(await fx.store.dueNowCount(c, NOW + 1), 2);
    assert.equal(
      await fx.store.removeMany([
        { carrierId: c, cardId: 'x' },
        { carrierId: c, cardId: 'nope' },
      ]),
      1,
    );
    assert.deepEqual(await fx.store.depths(c), { priority: 0, normal: 2, running: 0 });
  });
});

describe('remove', () => {
  test('polled card → true, lanes and hash gone; again → false', async () => {
    const c = await polled();
    await request(c);
    assert.equal(await fx.store.remove(c, 'a'), true);
    assert.equal(await fx.store.laneOf(c, 'a'), null);
    assert.equal(await fx.redis.exists(fx.keys(c).due('a')), 0);
    assert.equal(await fx.store.remove(c, 'a'), false);
  });

  test('claim of an executing card is left for its finish (which does not re-add it)', async () => {
    const c = await polled({ card_status: NOW - 1 });
    await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW });
    await fx.store.remove(c, 'a');
    assert.equal(await fx.redis.get(fx.keys(c).claim('a')), tok('r1', 'a'));
    assert.equal(await fx.store.finish({ carrierId: c, cardId: 'a', token: tok('r1', 'a'), now: NOW + 1, set: { 'ok:card_status': 1 }, del: [] }), true);
    assert.equal(await fx.store.laneOf(c, 'a'), null);
    assert.equal(await fx.redis.exists(fx.keys(c).due('a')), 0);
  });
});
