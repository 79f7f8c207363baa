/**
 * finish (docs/design.md, 'Lua scripts'), including the fixes over the seed's finish that
 * lua/finish.lua's header lists: no resurrection of a removed card's hash, and a request-check
 * landing during execution is never lost.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createFixture, CLAIM_DEFAULTS, type Fixture, tokenOf } from './fixture.js';
import { DueField } from '../../src/redis/dueFields.js';
import type { FinishInput } from '../../src/redis/carrierQueueStore.js';

const NOW = 3_000_000;
/** A token of a claim made at `at` (NOW unless said). */
const tok = (prefix: string, cardId: string, at = NOW): string => tokenOf(prefix, cardId, at);
const HOUR = 3_600_000;
let fx: Fixture;
let carrier = 200;

before(async () => {
  fx = await createFixture('lua-finish');
});
after(async () => {
  await fx.close();
});

/** Fresh account with card 'a' (card_status + carddata due) claimed in round r1 at NOW, exec by w1. */
async function executing(): Promise<number> {
  carrier += 1;
  await fx.store.upsert({ carrierId: carrier, cardId: 'a', now: NOW, dues: { card_status: NOW - 1, carddata: NOW + 50_000 } });
  await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: carrier, now: NOW });
  assert.equal(await fx.store.acquireExec(carrier, 'a', tok('r1', 'a'), 'w1', 5_000, NOW), 'acquired');
  return carrier;
}

function finish(c: number, over: Partial<FinishInput> = {}): Promise<boolean> {
  return fx.store.finish({
    carrierId: c,
    cardId: 'a',
    token: tok('r1', 'a'),
    now: NOW + 100,
    set: { [DueField.due('card_status')]: NOW + 60_000, [DueField.ok('card_status')]: NOW + 100 },
    del: [DueField.fail('card_status')],
    ...over,
  });
}

describe('finish', () => {
  test('owner: result written, claim/exec/running released, scored by earliest due in the normal lane', async () => {
    const c = await executing();
    await fx.redis.hset(fx.keys(c).due('a'), DueField.fail('card_status'), '3');
    assert.equal(await finish(c), true);
    const hash = await fx.hash(c, 'a');
    assert.equal(hash[DueField.ok('card_status')], String(NOW + 100));
    assert.equal(hash[DueField.fail('card_status')], undefined, 'del applied');
    assert.equal(await fx.redis.exists(fx.keys(c).claim('a'), fx.keys(c).exec('a')), 0);
    assert.equal(await fx.score(c, 'running', tok('r1', 'a')), null);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 50_000, 'earliest of 60 000 and 50 000');
  });

  test('types the claim deferred: an owner never moves their due later, keeps their request, drops dfr; rescored to the earliest due', async () => {
    carrier += 1;
    const c = carrier;
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW - 10, carddata: NOW - 10 } });
    await fx.store.requestCheck({ carrierId: c, cardId: 'a', now: NOW - 5, cooldownMs: 0, lane: 'normal', types: ['carddata', 'card_status'] });
    const claimed = await fx.store.claim({
      ...CLAIM_DEFAULTS,
      carrierId: c,
      now: NOW,
      typeGroups: { card_status: 'status', carddata: 'data' },
      groupBudget: { status: 1, data: 0 },
    });
    assert.deepEqual(
      claimed.claimed.map((x) => x.cardId),
      ['a'],
    );
    assert.equal((await fx.hash(c, 'a')).dfr, 'carddata');
    // A result that (wrongly) also writes carddata: its due is not moved later, its confirmation untouched.
    const set = { [DueField.due('card_status')]: NOW + 60_000, [DueField.due('carddata')]: NOW + 60_000, [DueField.confirm('carddata')]: '30' };
    assert.equal(await finish(c, { set, del: [] }), true);
    const hash = await fx.hash(c, 'a');
    assert.equal(hash[DueField.due('card_status')], String(NOW + 60_000));
    assert.equal(hash[DueField.request('card_status')], undefined, 'served');
    assert.equal(hash[DueField.due('carddata')], String(NOW - 10), 'deferred: due kept');
    assert.equal(hash[DueField.request('carddata')], String(NOW - 5), 'deferred: request still pending');
    assert.equal(hash[DueField.confirm('carddata')], undefined);
    assert.equal(hash.dfr, undefined);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW - 10, 'due again at once');
  });

  test("a stale token does not read dfr as its own (the current owner's claim decides)", async () => {
    const c = await executing();
    await fx.redis.hset(fx.keys(c).due('a'), 'dfr', 'card_status');
    assert.equal(await finish(c, { leaseLost: true }), false);
    assert.equal((await fx.hash(c, 'a')).dfr, 'card_status', "nothing released: the claim's fields stay");
  });

  test('prio = 1 → priority lane', async () => {
    const c = await executing();
    await fx.redis.hset(fx.keys(c).due('a'), 'prio', '1');
    await finish(c);
    assert.equal(await fx.store.laneOf(c, 'a'), 'priority');
  });

  test('prio cleared while in the priority lane → back to the normal lane', async () => {
    carrier += 1;
    const c = carrier;
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW + 99_000 } });
    await fx.store.requestCheck({ carrierId: c, cardId: 'a', now: NOW, cooldownMs: 0, lane: 'priority', types: ['card_status'] });
    const claimed = await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW + 1 });
    assert.equal(claimed.claimed[0]?.fromPriority, true);
    assert.equal(await finish(c, { token: tok('r1', 'a', NOW + 1) }), true);
    assert.equal(await fx.store.laneOf(c, 'a'), 'normal');
  });

  test('next due equal to the lease end (the score the claim gave it): stays in its lane, released', async () => {
    const c = await executing();
    const leaseEnd = NOW + CLAIM_DEFAULTS.leaseMs;
    assert.equal(await fx.score(c, 'queue', 'a'), leaseEnd, 'the claim scored it at its lease end');
    assert.equal(await finish(c, { set: { [DueField.due('card_status')]: leaseEnd }, del: [DueField.due('carddata')] }), true);
    assert.equal(await fx.score(c, 'queue', 'a'), leaseEnd);
    assert.equal(await fx.store.laneOf(c, 'a'), 'normal');
    assert.equal(await fx.score(c, 'running', tok('r1', 'a')), null);
    assert.equal((await fx.hash(c, 'a'))[DueField.due('card_status')], String(leaseEnd));
  });

  test("the result's own prio decides the lane: set → priority lane, deleted → normal lane", async () => {
    const toPriority = await executing();
    assert.equal(await finish(toPriority, { set: { [DueField.due('card_status')]: NOW + 60_000, prio: '1' } }), true);
    assert.equal(await fx.store.laneOf(toPriority, 'a'), 'priority');
    assert.equal(await fx.score(toPriority, 'prio', 'a'), NOW + 50_000);
    const toNormal = await executing();
    await fx.redis.hset(fx.keys(toNormal).due('a'), 'prio', '1');
    assert.equal(await finish(toNormal, { del: ['prio'] }), true);
    assert.equal(await fx.store.laneOf(toNormal, 'a'), 'normal');
    assert.equal((await fx.hash(toNormal, 'a')).prio, undefined);
  });

  test("the result's deletions: a field in the hash goes, one the result sets and deletes goes, an absent one changes nothing", async () => {
    const c = await executing();
    await fx.redis.hset(fx.keys(c).due('a'), DueField.fail('card_status'), '2');
    assert.equal(await finish(c, { del: [DueField.fail('card_status'), DueField.fail('carddata')] }), true);
    let hash = await fx.hash(c, 'a');
    assert.equal(hash[DueField.fail('card_status')], undefined, 'existing field deleted');
    assert.equal(hash[DueField.due('card_status')], String(NOW + 60_000), 'sets applied');
    // Set and deleted by the same result: deletions apply after sets.
    const d = await executing();
    assert.equal(await finish(d, { set: { [DueField.due('card_status')]: NOW + 60_000, x: '1' }, del: ['x'] }), true);
    hash = await fx.hash(d, 'a');
    assert.equal(hash.x, undefined);
    assert.equal(hash[DueField.due('card_status')], String(NOW + 60_000));
    assert.equal(await fx.score(d, 'queue', 'a'), NOW + 50_000, 'rescored by the earliest due');
  });

  test('no due type left → now + 1 h', async () => {
    const c = await executing();
    await finish(c, { set: {}, del: [DueField.due('card_status'), DueField.due('carddata')] });
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 100 + HOUR);
  });

  test('fix: card removed during execution → result not written, hash not recreated, claim released, true', async () => {
    const c = await executing();
    await fx.store.remove(c, 'a');
    assert.equal(await finish(c), true);
    assert.equal(await fx.redis.exists(fx.keys(c).due('a')), 0);
    assert.equal(await fx.store.laneOf(c, 'a'), null);
    assert.equal(await fx.redis.exists(fx.keys(c).claim('a'), fx.keys(c).exec('a')), 0);
    assert.equal(await fx.score(c, 'running', tok('r1', 'a')), null);
  });

  test('fix: card removed and lease lost → nothing written, false', async () => {
    const c = await executing();
    await fx.store.remove(c, 'a');
    assert.equal(await finish(c, { token: tok('r0', 'a') }), false);
    assert.equal(await fx.redis.exists(fx.keys(c).due('a')), 0);
  });

  test('lane entry without a due hash is dropped (cannot be polled)', async () => {
    const c = await executing();
    await fx.redis.del(fx.keys(c).due('a'));
    assert.equal(await finish(c), true);
    assert.equal(await fx.store.laneOf(c, 'a'), null);
  });

  test('fix: request-check during execution survives: due:t kept at the request, req:t kept, card due again', async () => {
    const c = await executing();
    await fx.store.requestCheck({ carrierId: c, cardId: 'a', now: NOW + 50, cooldownMs: 0, lane: 'normal', types: ['card_status'] });
    assert.equal(await finish(c), true);
    const state = await fx.store.readDue(c, 'a');
    assert.equal(state?.types.card_status.due, NOW + 50);
    assert.equal(state?.types.card_status.req, NOW + 50);
    assert.equal(state?.types.card_status.ok, NOW + 100, 'business result still written');
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 50);
  });

  test('fix: request for a type the result does not mention is kept too; a priority request goes to the priority lane', async () => {
    const c = await executing();
    await fx.store.requestCheck({ carrierId: c, cardId: 'a', now: NOW + 50, cooldownMs: 0, lane: 'priority', types: ['carddata'] });
    await finish(c);
    const state = await fx.store.readDue(c, 'a');
    assert.equal(state?.types.carddata.due, NOW + 50);
    assert.equal(await fx.store.laneOf(c, 'a'), 'priority');
    assert.equal(await fx.score(c, 'prio', 'a'), NOW + 50);
  });

  test('request made before the claim was served by this execution: req:t dropped, due written as given', async () => {
    carrier += 1;
    const c = carrier;
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW + 99_000 } });
    await fx.store.requestCheck({ carrierId: c, cardId: 'a', now: NOW - 10, cooldownMs: 0, lane: 'normal', types: ['card_status'] });
    await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW });
    await finish(c);
    const state = await fx.store.readDue(c, 'a');
    assert.equal(state?.types.card_status.req, null);
    assert.equal(state?.types.card_status.due, NOW + 60_000);
  });

  test('a token without the claim instant counts every request as made after the claim: none is lost', async () => {
    carrier += 1;
    const c = carrier;
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW + 99_000 } });
    await fx.store.requestCheck({ carrierId: c, cardId: 'a', now: NOW - 10, cooldownMs: 0, lane: 'normal', types: ['card_status'] });
    // A token `<prefix>:<id>` (claim.lua writes `<prefix>@<ms>:<id>`).
    const bare = 'old.1:a';
    await fx.redis.set(fx.keys(c).claim('a'), bare, 'PX', 600_000);
    await fx.redis.zadd(fx.keys(c).running, NOW + 1_000, bare);
    await fx.redis.zadd(fx.keys(c).queue, 'XX', NOW + 1_000, 'a');
    assert.equal(await finish(c, { token: bare }), true);
    const state = await fx.store.readDue(c, 'a');
    assert.equal(state?.types.card_status.req, NOW - 10, 'the request stays pending');
    assert.equal(state?.types.card_status.due, NOW - 10, 'due no later than the request');
  });

  test("request with confirmation during execution: the request's cfm/exp win over the result's", async () => {
    const c = await executing();
    await fx.store.requestCheck({
      carrierId: c,
      cardId: 'a',
      now: NOW + 50,
      cooldownMs: 0,
      lane: 'priority',
      types: ['card_status'],
      confirmDelaysSec: [10, 30],
      expected: 'offline',
    });
    await finish(c, { del: [DueField.confirm('card_status'), DueField.expected('card_status')] });
    const state = await fx.store.readDue(c, 'a');
    assert.deepEqual(state?.types.card_status.cfm, [10, 30]);
    assert.equal(state?.types.card_status.exp, 'offline');
  });

  test('hash recreated during execution (remove + upsert): its requests count as after the claim', async () => {
    const c = await executing();
    await fx.store.remove(c, 'a');
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW + 10, dues: { card_status: NOW + 90_000 } });
    await fx.store.requestCheck({ carrierId: c, cardId: 'a', now: NOW + 20, cooldownMs: 0, lane: 'normal', types: ['card_status'] });
    assert.equal(await finish(c), true);
    assert.equal((await fx.store.readDue(c, 'a'))?.types.card_status.due, NOW + 20);
  });

  test('stale token: result recorded but no due moved later, cfm untouched, claim of the owner kept, false', async () => {
    const c = await executing();
    // Lease of r1 expires; r2 takes over.
    await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW + 1_000, tokenPrefix: 'r2' });
    await fx.redis.hset(fx.keys(c).due('a'), DueField.confirm('card_status'), '10');
    const ok = await finish(c, {
      now: NOW + 1_100,
      set: {
        [DueField.due('card_status')]: NOW + 60_000,
        [DueField.due('carddata')]: NOW + 10,
        [DueField.ok('card_status')]: NOW + 1_100,
      },
      del: [DueField.confirm('card_status')],
    });
    assert.equal(ok, false);
    const state = await fx.store.readDue(c, 'a');
    assert.equal(state?.types.card_status.ok, NOW + 1_100);
    assert.equal(state?.types.card_status.due, NOW - 1, 'not moved later');
    assert.equal(state?.types.carddata.due, NOW + 10, 'moving earlier is fine');
    assert.deepEqual(state?.types.card_status.cfm, [10]);
    assert.equal(await fx.redis.get(fx.keys(c).claim('a')), tok('r2', 'a', NOW + 1_000));
    assert.equal(await fx.score(c, 'running', tok('r2', 'a', NOW + 1_000)), NOW + 2_000);
  });

  test('lease expired by now (no new claim yet) → false, claim left for the claim round to count', async () => {
    const c = await executing();
    assert.equal(await finish(c, { now: NOW + 1_000 }), false);
    assert.equal(await fx.score(c, 'running', tok('r1', 'a')), NOW + 1_000);
  });
});

/**
 * At most once per token (docs/design.md, 'Finish rules': idempotent): finishExecution runs as a
 * retried local activity. A retry after the first finish landed must get the first reply back and
 * apply nothing, however the caller recomputed.
 */
describe('finish with a result record (at most once per token)', () => {
  const failing = (count: number): Partial<FinishInput> => ({
    set: { [DueField.fail('card_status')]: count, [DueField.due('card_status')]: NOW + 1_000 * count },
    del: [],
  });

  test('a retry by the same token returns the first reply and the stored record, and writes nothing', async () => {
    const c = await executing();
    assert.equal(await finish(c, { ...failing(1), record: 'first' }), true);
    const after = await fx.hash(c, 'a');
    // The retry re-read the updated hash and computed a second failure: it must not land.
    assert.equal(await finish(c, { ...failing(2), now: NOW + 200, record: 'second' }), true, 'same reply as the first call');
    assert.deepEqual(await fx.hash(c, 'a'), after, 'nothing applied by the retry');
    assert.equal((await fx.store.readDue(c, 'a'))?.types.card_status.fail, 1);
    assert.deepEqual(await fx.store.finishWithRecord({ carrierId: c, cardId: 'a', token: tok('r1', 'a'), now: NOW + 300, set: {}, del: [], record: 'third' }), {
      owned: true,
      replayed: 'first',
    });
    const ttl = await fx.redis.pttl(fx.keys(c).finished('a'));
    assert.ok(ttl > 0 && ttl <= HOUR, `record expires within the hour (pttl ${ttl})`);
  });

  test('a stale finish is replayed too (its failure streak is not counted twice)', async () => {
    const c = await executing();
    await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW + 1_000, tokenPrefix: 'r2' });
    assert.equal(await finish(c, { ...failing(1), now: NOW + 1_100, record: 'stale' }), false);
    assert.equal(await finish(c, { ...failing(2), now: NOW + 1_200, record: 'stale-retry' }), false);
    assert.equal((await fx.store.readDue(c, 'a'))?.types.card_status.fail, 1);
    assert.equal(await fx.redis.get(fx.keys(c).claim('a')), tok('r2', 'a', NOW + 1_000), "the new owner's claim is untouched");
  });

  test("another token's finish is not a replay; a finish without a record stores and replays nothing", async () => {
    const c = await executing();
    assert.equal(await finish(c, { record: 'r1' }), true);
    await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW + 60_000, tokenPrefix: 'r2' });
    assert.equal(await finish(c, { token: tok('r2', 'a', NOW + 60_000), now: NOW + 60_100, ...failing(1) }), true, 'r2 applied');
    assert.equal((await fx.store.readDue(c, 'a'))?.types.card_status.fail, 1);
    assert.equal(
      await finish(c, { token: tok('r2', 'a', NOW + 60_000), now: NOW + 60_200, ...failing(5) }),
      false,
      'no record: a second call is a plain stale finish',
    );
    assert.equal((await fx.store.readDue(c, 'a'))?.types.card_status.fail, 5);
  });
});

/**
 * A lost lease (docs/design.md, 'cardCheck', step 4): an execution that lost its lease mid-way
 * records what its completed steps learned through the stale path, and never touches the claim or
 * lanes, even when its token still looks like the owner (the exec right went elsewhere).
 */
describe('finish after a lost lease', () => {
  test("writes the completed steps' fields as a stale finish, leaves claim, running and lane as they are", async () => {
    const c = await executing();
    const score = await fx.score(c, 'queue', 'a');
    await fx.redis.hset(fx.keys(c).due('a'), DueField.confirm('card_status'), '10');
    const owned = await finish(c, {
      leaseLost: true,
      record: 'lost',
      set: { [DueField.ok('card_status')]: NOW + 100, [DueField.due('card_status')]: NOW + 60_000 },
      del: [DueField.fail('card_status'), DueField.confirm('card_status')],
    });
    assert.equal(owned, false);
    const state = await fx.store.readDue(c, 'a');
    assert.equal(state?.types.card_status.ok, NOW + 100, 'what the step learned is written');
    assert.equal(state?.types.card_status.due, NOW - 1, 'due not moved later');
    assert.deepEqual(state?.types.card_status.cfm, [10], 'confirmation left to the owner');
    assert.equal(await fx.redis.get(fx.keys(c).claim('a')), tok('r1', 'a'), 'claim not released');
    assert.equal(await fx.redis.exists(fx.keys(c).exec('a')), 1);
    assert.equal(await fx.score(c, 'running', tok('r1', 'a')), NOW + 1_000);
    assert.equal(await fx.score(c, 'queue', 'a'), score, 'lane score untouched');
  });
});
