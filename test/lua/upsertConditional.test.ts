/**
 * upsert.lua's conditional write, `<init>,<cap>` per type (docs/design.md, 'Lua scripts' and
 * 'Lifecycle'; issue 46, item 5): lifecycle, outbox relay and rebuild read due times before they
 * write, so the script keeps the due the hash holds when the write lands — at most lowered to the
 * cap — and writes the caller's `<init>` only for a type the hash has none of. One case per rule,
 * then the invariant over random values: a conditional write never moves a held due later.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createFixture, CLAIM_DEFAULTS, type Fixture } from './fixture.js';
import { callScript } from '../../src/redis/scriptLoader.js';
import { upsertCall } from '../../src/redis/carrierScripts.js';
import { expectCode, ScriptArgumentError, InvalidStoreInputError } from '../../src/redis/storeErrors.js';
import type { CheckType } from '../../src/workflow-safe/checkTypes.js';

const NOW = 6_000_000;
let fx: Fixture;
let carrier = 700;

before(async () => {
  fx = await createFixture('lua-upsert-conditional');
});
after(async () => {
  await fx.close();
});

/** A fresh account whose card `a` holds these dues (plain upsert). */
async function held(dues: Partial<Record<CheckType, number>>): Promise<number> {
  carrier += 1;
  await fx.store.upsert({ carrierId: carrier, cardId: 'a', now: NOW, dues });
  return carrier;
}

const conditional = (c: number, dues: Partial<Record<CheckType, number>>, caps: Partial<Record<CheckType, number>>, now = NOW) =>
  fx.store.upsert({ carrierId: c, cardId: 'a', now, dues, caps });

const dueOf = async (c: number, type: CheckType): Promise<number | null | undefined> => (await fx.store.readDue(c, 'a'))?.types[type].due;

describe('upsert, conditional', () => {
  test('a held due within the cap is kept; the caller’s init is not written', async () => {
    const c = await held({ card_status: NOW + 5_000 });
    await conditional(c, { card_status: NOW + 1 }, { card_status: NOW + 60_000 });
    assert.equal(await dueOf(c, 'card_status'), NOW + 5_000);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 5_000);
  });

  test('a held due later than the cap is lowered to the cap (a shortened interval)', async () => {
    const c = await held({ carddata: NOW + 86_400_000 });
    await conditional(c, { carddata: NOW + 86_400_000 }, { carddata: NOW + 300_000 });
    assert.equal(await dueOf(c, 'carddata'), NOW + 300_000);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 300_000);
  });

  test('a type the hash has none of gets the init; a new card likewise', async () => {
    const c = await held({ card_status: NOW + 5_000 });
    await conditional(c, { card_status: NOW, carddata: NOW + 700 }, { card_status: NOW + 60_000, carddata: NOW + 60_000 });
    assert.equal(await dueOf(c, 'carddata'), NOW + 700);
    assert.equal(await dueOf(c, 'card_status'), NOW + 5_000);
    carrier += 1;
    await conditional(carrier, { card_status: NOW + 900 }, { card_status: NOW + 60_000 });
    assert.equal(await dueOf(carrier, 'card_status'), NOW + 900);
    assert.equal(await fx.score(carrier, 'queue', 'a'), NOW + 900);
    assert.equal((await fx.hash(carrier, 'a')).carrier, String(carrier));
  });

  test('plain and conditional types in one call; types not given are dropped as before', async () => {
    const c = await held({ card_status: NOW + 5_000, carddata: NOW + 6_000, realname: NOW + 7_000 });
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW + 100, carddata: NOW + 200 }, caps: { carddata: NOW + 60_000 } });
    assert.equal(await dueOf(c, 'card_status'), NOW + 100, 'plain: written as given');
    assert.equal(await dueOf(c, 'carddata'), NOW + 6_000, 'conditional: held due kept');
    assert.equal(await dueOf(c, 'realname'), null, 'not given: no longer polled');
  });

  test('a pending request still bounds the due (I5)', async () => {
    const c = await held({ card_status: NOW + 50_000 });
    await fx.store.requestCheck({ carrierId: c, cardId: 'a', now: NOW + 10, cooldownMs: 0, lane: 'normal', types: ['card_status'] });
    await conditional(c, { card_status: NOW + 50_000 }, { card_status: NOW + 60_000 }, NOW + 20);
    assert.equal(await dueOf(c, 'card_status'), NOW + 10);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 10);
  });

  test('claimed card: the held due is kept, the score stays at the lease expiry, ups marks the hash', async () => {
    const c = await held({ card_status: NOW - 1 });
    await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW });
    await conditional(c, { card_status: NOW + 1 }, { card_status: NOW + 60_000 }, NOW + 1);
    assert.equal(await dueOf(c, 'card_status'), NOW - 1);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + CLAIM_DEFAULTS.leaseMs);
    assert.equal((await fx.hash(c, 'a')).ups, '1');
  });

  test('invariant: never later than the held due, never later than the cap, the init only when none was held', async () => {
    let seed = 46;
    const rnd = (n: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    for (let i = 0; i < 200; i += 1) {
      const has = rnd(4) !== 0;
      const heldDue = NOW + rnd(200_000) - 50_000;
      const init = NOW + rnd(200_000) - 50_000;
      const cap = NOW + rnd(200_000);
      const c = has ? await held({ card_status: heldDue }) : ((carrier += 1), carrier);
      await conditional(c, { card_status: init }, { card_status: cap });
      const due = await dueOf(c, 'card_status');
      const expected = has ? Math.min(heldDue, cap) : init;
      assert.equal(due, expected, `case ${i}: held ${has ? heldDue : 'none'}, init ${init}, cap ${cap}`);
      if (has) assert.ok(due <= heldDue, `case ${i}: moved later`);
      assert.equal(await fx.score(c, 'queue', 'a'), expected, `case ${i}: lane score`);
    }
  });

  test('invalid conditional values → -2; a non-finite cap is refused by the store', async () => {
    const c = await held({ card_status: NOW });
    const call = upsertCall(fx.keys(c), { carrierId: String(c), cardId: 'a', now: NOW, dues: { card_status: 1 }, caps: { card_status: 2 } });
    assert.equal(call.args[4], '1,2');
    for (const bad of ['1,', ',2', '1,2,3', '1;2', 'x,2']) {
      const args = [...call.args];
      args[4] = bad;
      const reply = await callScript(fx.redis, call.name, call.keys, args);
      assert.throws(() => expectCode('upsert', reply, []), ScriptArgumentError, bad);
    }
    assert.equal(await dueOf(c, 'card_status'), NOW, 'nothing written');
    await assert.rejects(
      fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: 1 }, caps: { card_status: Number.NaN } }),
      InvalidStoreInputError,
    );
  });
});
