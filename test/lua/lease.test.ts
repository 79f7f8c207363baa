/**
 * acquireExec, renew, holdClaims and release (docs/design.md, 'Lua scripts'): one case per branch.
 * Leases are judged against the "now" passed in, so expiry is exercised by moving that clock.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createFixture, CLAIM_DEFAULTS, type Fixture, tokenOf } from './fixture.js';
import { callScript } from '../../src/redis/scriptLoader.js';
import { acquireExecCall, holdClaimsCall, renewCall } from '../../src/redis/carrierScripts.js';
import { expectCode, ScriptArgumentError, InvalidStoreInputError } from '../../src/redis/storeErrors.js';

const NOW = 2_000_000;
/** A token of a claim made at `at` (NOW unless said). */
const tok = (prefix: string, cardId: string, at = NOW): string => tokenOf(prefix, cardId, at);
const LEASE = CLAIM_DEFAULTS.leaseMs;
let fx: Fixture;
let carrier = 100;

before(async () => {
  fx = await createFixture('lua-lease');
});
after(async () => {
  await fx.close();
});

/** A fresh account with card 'a' claimed by token r1:a at NOW (lease until NOW + LEASE). */
async function claimed(): Promise<number> {
  carrier += 1;
  await fx.store.upsert({ carrierId: carrier, cardId: 'a', now: NOW, dues: { card_status: NOW - 1 } });
  const result = await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: carrier, now: NOW });
  assert.equal(result.claimed[0]?.token, tok('r1', 'a'));
  return carrier;
}

describe('acquireExec', () => {
  const cases: { name: string; act: (c: number) => Promise<unknown>; expected: unknown }[] = [
    { name: 'owner acquires', act: (c) => fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW + 1), expected: 'acquired' },
    { name: 'wrong token → lost', act: (c) => fx.store.acquireExec(c, 'a', tok('r0', 'a'), 'w1', 5_000, NOW + 1), expected: 'lost' },
    {
      name: 'lease expired by now (key still there) → lost',
      act: (c) => fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW + LEASE),
      expected: 'lost',
    },
    {
      name: 'second executor of the same token → busy',
      act: async (c) => {
        await fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW + 1);
        return fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w2', 5_000, NOW + 2);
      },
      expected: 'busy',
    },
    {
      name: 'same executor asking again (activity retry) → acquired',
      act: async (c) => {
        await fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW + 1);
        return fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW + 2);
      },
      expected: 'acquired',
    },
    {
      name: "an earlier token's leftover exec record does not block the new owner",
      act: async (c) => {
        await fx.redis.set(fx.keys(c).exec('a'), 'r0:a|old', 'PX', 60_000);
        return fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW + 1);
      },
      expected: 'acquired',
    },
  ];
  for (const { name, act, expected } of cases) {
    test(name, async () => {
      assert.equal(await act(await claimed()), expected);
    });
  }

  test('stores <token>|<value> with PX ≥ ttl', async () => {
    const c = await claimed();
    await fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW + 1);
    assert.equal(await fx.redis.get(fx.keys(c).exec('a')), `${tok('r1', 'a')}|w1`);
    assert.ok((await fx.redis.pttl(fx.keys(c).exec('a'))) > 5_000);
  });

  test('invalid ttl → store refuses; script answers -2', async () => {
    const c = await claimed();
    await assert.rejects(fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 0, NOW), InvalidStoreInputError);
    const call = acquireExecCall(fx.keys(c), 'a', tok('r1', 'a'), 'w1', 1, NOW);
    const reply = await callScript(fx.redis, call.name, call.keys, [call.args[0]!, call.args[1]!, 0, NOW]);
    assert.throws(() => expectCode('acquireExec', reply, []), ScriptArgumentError);
  });
});

describe('renew', () => {
  test('owner with exec right: running expiry and lane score = now + lease', async () => {
    const c = await claimed();
    await fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW);
    assert.equal(await fx.store.renew(c, 'a', tok('r1', 'a'), 'w1', 3_000, NOW + 500), true);
    assert.equal(await fx.score(c, 'running', tok('r1', 'a')), NOW + 3_500);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 3_500);
    assert.equal(await fx.score(c, 'prio', 'a'), null, 'XX: not added to the other lane');
    // The renewed lease now outlives the original one.
    assert.equal(await fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW + 2_000), 'acquired');
  });

  const failing: { name: string; act: (c: number) => Promise<boolean> }[] = [
    { name: 'wrong token', act: (c) => fx.store.renew(c, 'a', tok('r0', 'a'), 'w1', 1_000, NOW + 1) },
    { name: 'other exec value', act: (c) => fx.store.renew(c, 'a', tok('r1', 'a'), 'w2', 1_000, NOW + 1) },
    { name: 'lease expired by now', act: (c) => fx.store.renew(c, 'a', tok('r1', 'a'), 'w1', 1_000, NOW + LEASE) },
  ];
  for (const { name, act } of failing) {
    test(`${name} → false, nothing extended`, async () => {
      const c = await claimed();
      await fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW);
      assert.equal(await act(c), false);
      assert.equal(await fx.score(c, 'running', tok('r1', 'a')), NOW + LEASE);
    });
  }

  test('no exec right acquired → false', async () => {
    const c = await claimed();
    assert.equal(await fx.store.renew(c, 'a', tok('r1', 'a'), 'w1', 1_000, NOW + 1), false);
  });

  test('invalid lease → -2', async () => {
    const c = await claimed();
    const call = renewCall(fx.keys(c), 'a', tok('r1', 'a'), 'w1', 1, NOW);
    const args = [...call.args];
    args[2] = -5;
    assert.throws(() => expectCode('renew', null, []));
    const reply = await callScript(fx.redis, call.name, call.keys, args);
    assert.throws(() => expectCode('renew', reply, []), ScriptArgumentError);
  });
});

describe('holdClaims', () => {
  test('a claim no run has taken up: running expiry and lane score = now + lease; a claim round at the old expiry reclaims nothing', async () => {
    const c = await claimed();
    assert.equal(await fx.store.holdClaims(c, [{ cardId: 'a', token: tok('r1', 'a') }], LEASE, NOW + 500), 1);
    assert.equal(await fx.score(c, 'running', tok('r1', 'a')), NOW + 500 + LEASE);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 500 + LEASE);
    assert.equal(await fx.score(c, 'prio', 'a'), null, 'XX: not added to the other lane');
    assert.ok((await fx.redis.pttl(fx.keys(c).claim('a'))) > LEASE, 'the claim key outlives the held lease');
    const round = await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW + LEASE, tokenPrefix: 'r2' });
    assert.equal(round.expired, 0);
    assert.deepEqual(round.claimed, []);
    // The late run takes its card up with its own claim.
    assert.equal(await fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW + LEASE + 1), 'acquired');
  });

  test('never shortens a lease: a hold with an earlier "now" keeps the current expiry', async () => {
    const c = await claimed();
    assert.equal(await fx.store.holdClaims(c, [{ cardId: 'a', token: tok('r1', 'a') }], 100, NOW + 1), 1);
    assert.equal(await fx.score(c, 'running', tok('r1', 'a')), NOW + LEASE);
  });

  test("an earlier token's leftover exec record does not stop the hold", async () => {
    const c = await claimed();
    await fx.redis.set(fx.keys(c).exec('a'), 'r0:a|old', 'PX', 60_000);
    assert.equal(await fx.store.holdClaims(c, [{ cardId: 'a', token: tok('r1', 'a') }], LEASE, NOW + 500), 1);
  });

  const untouched: { name: string; setup?: (c: number) => Promise<unknown>; token?: string; now?: number }[] = [
    { name: 'wrong token', token: tok('r0', 'a') },
    { name: 'lease expired by now (not brought back)', now: NOW + LEASE },
    { name: 'its run took the exec right (the run renews it)', setup: (c) => fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW + 1) },
    { name: 'released', setup: (c) => fx.store.release(c, 'a', tok('r1', 'a'), NOW + 1) },
  ];
  for (const { name, setup, token = tok('r1', 'a'), now = NOW + 500 } of untouched) {
    test(`${name} → 0, nothing extended`, async () => {
      const c = await claimed();
      await setup?.(c);
      const before = { running: await fx.score(c, 'running', tok('r1', 'a')), queue: await fx.score(c, 'queue', 'a') };
      assert.equal(await fx.store.holdClaims(c, [{ cardId: 'a', token }], LEASE, now), 0);
      assert.deepEqual({ running: await fx.score(c, 'running', tok('r1', 'a')), queue: await fx.score(c, 'queue', 'a') }, before);
    });
  }

  test('several cards in one call: counts those held, leaves the others', async () => {
    carrier += 1;
    const c = carrier;
    for (const id of ['a', 'b', 'c']) await fx.store.upsert({ carrierId: c, cardId: id, now: NOW, dues: { card_status: NOW - 1 } });
    const round = await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW });
    assert.equal(round.claimed.length, 3);
    await fx.store.acquireExec(c, 'b', tok('r1', 'b'), 'w1', 5_000, NOW + 1);
    const claims = ['a', 'b', 'c'].map((id) => ({ cardId: id, token: tok('r1', id) }));
    assert.equal(await fx.store.holdClaims(c, claims, LEASE, NOW + 500), 2);
    assert.equal(await fx.score(c, 'running', tok('r1', 'a')), NOW + 500 + LEASE);
    assert.equal(await fx.score(c, 'running', tok('r1', 'b')), NOW + LEASE);
    assert.equal(await fx.score(c, 'running', tok('r1', 'c')), NOW + 500 + LEASE);
    assert.equal(await fx.store.holdClaims(c, [], LEASE, NOW + 500), 0, 'nothing to hold: no call');
  });

  test('bad input: the store names the field; the script answers -2 to a bad lease or an odd key count', async () => {
    const c = await claimed();
    assert.throws(() => holdClaimsCall(fx.keys(c), [{ cardId: 'a', token: tok('r1', 'a') }], 0, NOW), InvalidStoreInputError);
    assert.throws(() => holdClaimsCall(fx.keys(c), [{ cardId: 'a:b', token: tok('r1', 'a') }], 1, NOW), InvalidStoreInputError);
    assert.throws(() => holdClaimsCall(fx.keys(c), [{ cardId: 'a', token: '' }], 1, NOW), InvalidStoreInputError);
    const call = holdClaimsCall(fx.keys(c), [{ cardId: 'a', token: tok('r1', 'a') }], 1_000, NOW);
    const badLease = [...call.args];
    badLease[0] = -5;
    assert.equal(await callScript(fx.redis, call.name, call.keys, badLease), -2);
    assert.equal(await callScript(fx.redis, call.name, call.keys.slice(0, -1), call.args), -2);
    assert.equal(await fx.score(c, 'running', tok('r1', 'a')), NOW + LEASE, 'nothing extended');
  });
});

describe('release', () => {
  test('owner: claim, exec, running and dfr dropped; score = now in its lane', async () => {
    const c = await claimed();
    await fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW);
    // As a claim that deferred a type leaves it.
    await fx.redis.hset(fx.keys(c).due('a'), 'dfr', 'carddata');
    assert.equal(await fx.store.release(c, 'a', tok('r1', 'a'), NOW + 10), true);
    assert.equal((await fx.hash(c, 'a')).dfr, undefined);
    assert.equal(await fx.redis.exists(fx.keys(c).claim('a'), fx.keys(c).exec('a')), 0);
    assert.equal(await fx.score(c, 'running', tok('r1', 'a')), null);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 10);
    // Claimable at once.
    const again = await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW + 10, tokenPrefix: 'r2' });
    assert.deepEqual(
      again.claimed.map((x) => x.token),
      [tok('r2', 'a', NOW + 10)],
    );
  });

  test('with a retry delay: the card is claimable only once the delay has passed', async () => {
    const c = await claimed();
    assert.equal(await fx.store.release(c, 'a', tok('r1', 'a'), NOW + 10, 15_000), true);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 10 + 15_000);
    const early = await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW + 1_000, tokenPrefix: 'r2' });
    assert.deepEqual(early.claimed, []);
    const later = await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW + 10 + 15_000, tokenPrefix: 'r3' });
    assert.deepEqual(
      later.claimed.map((x) => x.token),
      [tok('r3', 'a', NOW + 10 + 15_000)],
    );
  });

  test('wrong token → false', async () => {
    const c = await claimed();
    assert.equal(await fx.store.release(c, 'a', tok('r0', 'a'), NOW + 10), false);
    assert.equal(await fx.redis.get(fx.keys(c).claim('a')), tok('r1', 'a'));
  });

  test('lease expired by now → false; the next claim round counts it as expired', async () => {
    const c = await claimed();
    assert.equal(await fx.store.release(c, 'a', tok('r1', 'a'), NOW + LEASE + 1), false);
    const next = await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW + LEASE + 1, tokenPrefix: 'r2' });
    assert.equal(next.expired, 1);
    assert.deepEqual(
      next.claimed.map((x) => x.cardId),
      ['a'],
    );
  });
});
