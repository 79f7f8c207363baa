/**
 * claim (docs/design.md, 'Lua scripts'): one case per branch.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createFixture, CLAIM_DEFAULTS, type Fixture, tokenOf } from './fixture.js';
import { callScript } from '../../src/redis/scriptLoader.js';
import { claimCall, parseClaimReply } from '../../src/redis/carrierScripts.js';
import { expectCode } from '../../src/redis/storeErrors.js';
import { ScriptArgumentError } from '../../src/redis/storeErrors.js';
import type { ClaimInput } from '../../src/redis/carrierQueueStore.js';
import { DueField } from '../../src/redis/dueFields.js';
import { dueTypes } from '../../src/workflow-safe/schedule.js';

const NOW = 1_000_000;
/** A token of a claim made at `at` (NOW unless said). */
const tok = (prefix: string, cardId: string, at = NOW): string => tokenOf(prefix, cardId, at);
/** card_status and carddata in groups of their own (the saturate benchmark's layout). */
const SPLIT_GROUPS = { card_status: 'status', carddata: 'data' };
const INTERVALS = { card_status: 60_000, carddata: 60_000 };
let fx: Fixture;
let carrier = 0;

before(async () => {
  fx = await createFixture('lua-claim');
});
after(async () => {
  await fx.close();
});

/** Each case gets its own account so cases never see each other's cards. */
function nextCarrier(): number {
  carrier += 1;
  return carrier;
}

async function card(carrierId: number, cardId: string, dues: Record<string, number>, lane: 'priority' | 'normal' = 'normal') {
  await fx.store.upsert({ carrierId, cardId, now: NOW, dues });
  if (lane === 'priority') {
    await fx.store.requestCheck({ carrierId, cardId, now: NOW, cooldownMs: 0, lane: 'priority', types: ['package'] });
    // Restore the original package due so budgets are not affected by the request.
    await fx.redis.hdel(fx.keys(carrierId).due(cardId), tok('req', 'package'));
  }
}

function claim(carrierId: number, over: Partial<ClaimInput> = {}) {
  return fx.store.claim({ ...CLAIM_DEFAULTS, carrierId, now: NOW, ...over });
}

const ids = (result: { claimed: { cardId: string }[] }) => result.claimed.map((c) => c.cardId);

describe('claim', () => {
  test('claims due cards: token <prefix>@<now>:<id>, lane and running scored now + lease, no hash write', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 10 });
    await card(c, 'b', { card_status: NOW + 10 });
    const result = await claim(c);
    assert.deepEqual(result, { expired: 0, claimed: [{ cardId: 'a', token: tok('r1', 'a'), fromPriority: false }] });
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 1_000);
    assert.equal(await fx.score(c, 'running', tok('r1', 'a')), NOW + 1_000);
    assert.equal(await fx.redis.get(fx.keys(c).claim('a')), tok('r1', 'a'));
    assert.equal(tok('r1', 'a'), `r1@${NOW}:a`);
    // The claim's instant travels in the token: nothing is written to the card's hash.
    assert.deepEqual(await fx.hash(c, 'a'), { carrier: String(c), 'due:card_status': String(NOW - 10) });
    const pttl = await fx.redis.pttl(fx.keys(c).claim('a'));
    assert.ok(pttl > 1_000, 'PX = lease + safety margin');
  });

  test('a retried round (same prefix) gets back what its first attempt claimed, and claims nothing more', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 10 });
    await card(c, 'b', { card_status: NOW - 5 });
    const first = await claim(c, { tokenPrefix: 'run.7' });
    assert.deepEqual(ids(first).sort(), ['a', 'b']);
    await card(c, 'c', { card_status: NOW - 1 });
    // Without the retry flag the cards are simply not due any more: the first attempt's claims would be orphaned.
    assert.deepEqual(ids(await claim(c, { tokenPrefix: 'run.7', now: NOW + 1, inflightLimit: 2 })), []);
    const retried = await claim(c, { tokenPrefix: 'run.7', now: NOW + 1, retry: true });
    assert.deepEqual(retried.claimed.map((x) => `${x.cardId}=${x.token}`).sort(), [`a=run.7@${NOW}:a`, `b=run.7@${NOW}:b`]);
    // A prefix that shares a beginning is another round: not handed back.
    assert.deepEqual(ids(await claim(c, { tokenPrefix: 'run.', now: NOW + 2, retry: true })), ['c']);
  });

  test('a retried round hands its claims back with the lane each was taken from (fromPriority)', async () => {
    const c = nextCarrier();
    await card(c, 'p', { card_status: NOW - 10 }, 'priority');
    await card(c, 'n', { card_status: NOW - 10 });
    const first = await claim(c, { tokenPrefix: 'run.9' });
    const lanes = (r: { claimed: { cardId: string; fromPriority: boolean }[] }) => Object.fromEntries(r.claimed.map((x) => [x.cardId, x.fromPriority]));
    assert.deepEqual(lanes(first), { p: true, n: false });
    // The activity's first attempt landed but its reply was lost: the retry must say the same.
    assert.deepEqual(lanes(await claim(c, { tokenPrefix: 'run.9', now: NOW + 1, retry: true })), { p: true, n: false });
  });

  test('a retried round whose earlier claims have all expired hands nothing back and claims as a new round', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 10 });
    await card(c, 'b', { card_status: NOW - 5 });
    assert.deepEqual(ids(await claim(c, { tokenPrefix: 'run.3', inflightLimit: 1 })), ['a']);
    // The retry comes after the first attempt's lease ran out: its claim of a is reclaimed, so the
    // prefix holds nothing live, and the round must claim what is due (a again, and b).
    const later = NOW + 1_000;
    const retried = await claim(c, { tokenPrefix: 'run.3', now: later, retry: true });
    assert.equal(retried.expired, 1);
    assert.deepEqual(ids(retried).sort(), ['a', 'b']);
    assert.equal(await fx.redis.get(fx.keys(c).claim('b')), tok('run.3', 'b', later));
  });

  test('rounds of several accounts in the same tick, with as many keys each, all claim their cards (on a cluster: accounts on different slots)', async () => {
    // The claim passes its key count first: a client that routed calls by their first parameter
    // (ioredis' auto-pipelining on a cluster) would put these rounds in one cross-slot pipeline.
    const accounts = [nextCarrier(), nextCarrier(), nextCarrier(), nextCarrier()];
    for (const c of accounts) await card(c, 'a', { card_status: NOW - 10 });
    const rounds = await Promise.all(accounts.map((c) => claim(c)));
    assert.deepEqual(
      rounds.map((round) => ids(round)),
      accounts.map(() => ['a']),
    );
  });

  test('expired running tokens are reclaimed, counted, their claim and exec deleted; card claimable again', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW });
    await claim(c);
    assert.equal(await fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW), 'acquired');
    const later = NOW + 1_000; // expiry <= now: expired
    const result = await claim(c, { now: later, tokenPrefix: 'r2' });
    assert.equal(result.expired, 1);
    assert.deepEqual(ids(result), ['a']);
    assert.equal(await fx.redis.get(fx.keys(c).claim('a')), tok('r2', 'a', later));
    assert.equal(await fx.redis.exists(fx.keys(c).exec('a')), 0);
    assert.equal(await fx.score(c, 'running', tok('r1', 'a')), null);
  });

  test('no capacity: running full → nothing claimed', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW });
    await card(c, 'b', { card_status: NOW });
    assert.equal((await claim(c, { inflightLimit: 1 })).claimed.length, 1);
    assert.deepEqual(await claim(c, { inflightLimit: 1, tokenPrefix: 'r2' }), { expired: 0, claimed: [] });
  });

  test('lane order: priority up to quota (ratio, floor), normal, then priority again', async () => {
    const c = nextCarrier();
    for (const id of ['p1', 'p2', 'p3']) await card(c, id, { package: NOW - 5 }, 'priority');
    for (const id of ['n1', 'n2']) await card(c, id, { package: NOW - 5 });
    const result = await claim(c, { inflightLimit: 4, priorityRatio: 0.5 });
    assert.deepEqual(
      result.claimed.map((x) => [x.cardId, x.fromPriority]),
      [
        ['p1', true],
        ['p2', true],
        ['n1', false],
        ['n2', false],
      ],
    );
    const c2 = nextCarrier();
    for (const id of ['p1', 'p2', 'p3']) await card(c2, id, { package: NOW - 5 }, 'priority');
    await card(c2, 'n1', { package: NOW - 5 });
    // quota 2, normal 1, then priority again with the last slot.
    assert.deepEqual(ids(await claim(c2, { inflightLimit: 4, priorityRatio: 0.5 })), ['p1', 'p2', 'n1', 'p3']);
  });

  test('ratio 0 = priority takes all capacity; tiny ratio still gives priority one slot', async () => {
    const c = nextCarrier();
    for (const id of ['p1', 'p2']) await card(c, id, { package: NOW - 5 }, 'priority');
    await card(c, 'n1', { package: NOW - 5 });
    assert.deepEqual(ids(await claim(c, { inflightLimit: 2, priorityRatio: 0 })), ['p1', 'p2']);
    const c2 = nextCarrier();
    for (const id of ['p1', 'p2']) await card(c2, id, { package: NOW - 5 }, 'priority');
    for (const id of ['n1', 'n2']) await card(c2, id, { package: NOW - 5 });
    assert.deepEqual(ids(await claim(c2, { inflightLimit: 3, priorityRatio: 0.01 })), ['p1', 'n1', 'n2']);
  });

  test('priority in-flight limit: the priority lane claims past a full in-flight set, the normal lane does not', async () => {
    const c = nextCarrier();
    for (const id of ['n1', 'n2', 'n3']) await card(c, id, { package: NOW - 5 });
    assert.deepEqual(ids(await claim(c, { inflightLimit: 2, priorityInflightLimit: 4 })), ['n1', 'n2']);
    for (const id of ['p1', 'p2', 'p3']) await card(c, id, { package: NOW - 5 }, 'priority');
    // Running 2 = the in-flight limit: without the priority limit nothing is claimed (a request waits
    // for the account's runs to finish); with it, priority cards up to 4 in flight, n3 still waits.
    assert.deepEqual(ids(await claim(c, { inflightLimit: 2, tokenPrefix: 'r2' })), []);
    const result = await claim(c, { inflightLimit: 2, priorityInflightLimit: 4, tokenPrefix: 'r3' });
    assert.deepEqual(
      result.claimed.map((x) => [x.cardId, x.fromPriority]),
      [
        ['p1', true],
        ['p2', true],
      ],
    );
    assert.equal(await fx.redis.zcard(fx.keys(c).running), 4);
    assert.deepEqual(ids(await claim(c, { inflightLimit: 2, priorityInflightLimit: 4, tokenPrefix: 'r4' })), []);
    // With room in both: normal up to its limit, priority on top up to its own.
    const c2 = nextCarrier();
    for (const id of ['p1', 'p2', 'p3']) await card(c2, id, { package: NOW - 5 }, 'priority');
    for (const id of ['n1', 'n2']) await card(c2, id, { package: NOW - 5 });
    assert.deepEqual(ids(await claim(c2, { inflightLimit: 2, priorityInflightLimit: 3, priorityRatio: 0.5 })), ['p1', 'n1', 'p2']);
    await assert.rejects(claim(c2, { inflightLimit: 2, priorityInflightLimit: 1, tokenPrefix: 'r5' }), /priorityInflightLimit/);
  });

  test('claiming from the priority lane clears prio; from the normal lane leaves it', async () => {
    const c = nextCarrier();
    await card(c, 'p', { package: NOW - 5 }, 'priority');
    assert.equal((await fx.hash(c, 'p')).prio, '1');
    await claim(c);
    assert.equal((await fx.hash(c, 'p')).prio, undefined);
  });

  test('budget: the round stops at the first card that would exceed its only group (no skipping ahead)', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 30 }); // g1: 1
    await card(c, 'b', { card_status: NOW - 20, carddata: NOW - 20 }); // g1: 2 → 3 > 2
    await card(c, 'c', { card_status: NOW - 10 }); // would fit, but order is preserved
    const result = await claim(c, { groupBudget: { g1: 2 } });
    assert.deepEqual(ids(result), ['a']);
    assert.equal(await fx.score(c, 'queue', 'b'), NOW - 20, 'stopped card untouched');
  });

  test('budget per type: a card due for two groups, one exhausted, is claimed for the open group only; the other type stays due', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 20, carddata: NOW - 20 });
    const result = await claim(c, { typeGroups: SPLIT_GROUPS, groupBudget: { status: 5, data: 0 } });
    assert.deepEqual(ids(result), ['a']);
    const hash = await fx.hash(c, 'a');
    assert.equal(hash['due:carddata'], String(NOW - 20), 'deferred type keeps its due');
    assert.equal(hash.dfr, 'carddata');
    // The execution's plan (prepareExecution: readDue + dueTypes) leaves the deferred type out.
    const state = await fx.store.readDue(c, 'a');
    assert.deepEqual(state?.deferred, ['carddata']);
    assert.deepEqual(dueTypes(state, INTERVALS, NOW + 5).types, ['card_status']);
    // Its finish writes card_status only: carddata stays due, so the card is due again at once.
    assert.equal(await fx.store.acquireExec(c, 'a', tok('r1', 'a'), 'w1', 5_000, NOW), 'acquired');
    assert.equal(
      await fx.store.finish({ carrierId: c, cardId: 'a', token: tok('r1', 'a'), now: NOW + 50, set: { [DueField.due('card_status')]: NOW + 60_000 }, del: [] }),
      true,
    );
    const done = await fx.hash(c, 'a');
    assert.equal(done['due:carddata'], String(NOW - 20));
    assert.equal(done.dfr, undefined, 'finish drops dfr');
    assert.equal(await fx.score(c, 'queue', 'a'), NOW - 20, 'rescored to the deferred due');
    // Next round the data group has budget: claimed for carddata, nothing deferred.
    const next = await claim(c, { now: NOW + 1_000, tokenPrefix: 'r2', typeGroups: SPLIT_GROUPS, groupBudget: { status: 5, data: 5 } });
    assert.deepEqual(ids(next), ['a']);
    assert.equal((await fx.hash(c, 'a')).dfr, undefined);
    assert.deepEqual(dueTypes(await fx.store.readDue(c, 'a'), INTERVALS, NOW + 1_000).types, ['carddata']);
  });

  test('budget per type: the smaller group closes, the larger one keeps admitting its types (saturate: both groups used)', async () => {
    const c = nextCarrier();
    for (let i = 0; i < 6; i += 1) await card(c, `c${i}`, { card_status: NOW - 100 + i, carddata: NOW - 100 + i });
    const result = await claim(c, { typeGroups: SPLIT_GROUPS, groupBudget: { status: 5, data: 2 } });
    assert.deepEqual(ids(result), ['c0', 'c1', 'c2', 'c3', 'c4'], "status gets its 5, not data's 2");
    const dfr = await Promise.all(['c0', 'c1', 'c2', 'c3', 'c4'].map(async (id) => (await fx.hash(c, id)).dfr));
    assert.deepEqual(dfr, [undefined, undefined, 'carddata', 'carddata', 'carddata']);
    assert.equal(await fx.score(c, 'queue', 'c5'), NOW - 95, 'both groups closed: the round ended before c5');
  });

  test('budget per type: a card whose due types all wait for closed groups is skipped in place; later cards of open groups are claimed', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 40 }); // status: 1
    await card(c, 'b', { card_status: NOW - 30, carddata: NOW - 30 }); // status would be 2 > 1: status closes; data admits
    await card(c, 'd', { card_status: NOW - 25 }); // status closed: skipped, although it would fit
    await card(c, 'e', { carddata: NOW - 20 }); // data open: claimed
    const result = await claim(c, { typeGroups: SPLIT_GROUPS, groupBudget: { status: 1, data: 5 } });
    assert.deepEqual(ids(result), ['a', 'b', 'e']);
    assert.equal((await fx.hash(c, 'b')).dfr, 'card_status');
    assert.equal(await fx.score(c, 'queue', 'd'), NOW - 25, 'skipped card keeps its score');
    assert.equal((await fx.hash(c, 'd')).dfr, undefined, 'skipped card: no deferral mark');
  });

  test('budget per type: a closed group is closed for the rest of the round (no later, smaller card goes ahead)', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 30 }); // g1: 1
    await card(c, 'b', { card_status: NOW - 20, carddata: NOW - 20, realname: NOW - 20 }); // g1 refuses (3 > 2); g2 admits realname
    await card(c, 'c', { card_status: NOW - 10 }); // would fit g1, but g1 closed on b
    await card(c, 'r', { realname: NOW - 5 });
    const result = await claim(c, { groupBudget: { g1: 2, g2: 5 } });
    assert.deepEqual(ids(result), ['a', 'b', 'r']);
    assert.equal((await fx.hash(c, 'b')).dfr, 'card_status,carddata');
    assert.equal(await fx.score(c, 'queue', 'c'), NOW - 10);
  });

  test('budget per type: unbudgeted due types (no group, realname without real-name control) are claimed beside deferred ones', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 20, carddata: NOW - 20 }); // carddata has no group
    await card(c, 'b', { realname: NOW - 10 });
    const typeGroups = { card_status: 'status', realname: 'rn' };
    assert.deepEqual(ids(await claim(c, { typeGroups, groupBudget: { status: 0, rn: 5 } })), ['a', 'b']);
    assert.equal((await fx.hash(c, 'a')).dfr, 'card_status');
    assert.equal((await fx.hash(c, 'b')).dfr, undefined);
    // realname not counted: it runs while card_status waits. With every budgeted group closed, that
    // card ends the round (as the strict rule did): b is not looked at.
    const c2 = nextCarrier();
    await card(c2, 'a', { card_status: NOW - 20, realname: NOW - 20 });
    await card(c2, 'b', { carddata: NOW - 10 });
    assert.deepEqual(ids(await claim(c2, { typeGroups, groupBudget: { status: 0, rn: 0 }, countRealname: false })), ['a']);
    assert.equal((await fx.hash(c2, 'a')).dfr, 'card_status');
  });

  test('budget per type: skipped cards are passed over with an offset in both priority passes; priority keeps its lane when deferred', async () => {
    const c = nextCarrier();
    await card(c, 'p1', { carddata: NOW - 50 }, 'priority'); // data closed: skipped
    await card(c, 'p2', { card_status: NOW - 40, carddata: NOW - 40 }, 'priority'); // status only
    await card(c, 'p3', { card_status: NOW - 30 }, 'priority');
    await card(c, 'n1', { carddata: NOW - 20 });
    await card(c, 'n2', { card_status: NOW - 10 });
    const result = await claim(c, { typeGroups: SPLIT_GROUPS, groupBudget: { status: 10, data: 0 }, priorityRatio: 0.25, inflightLimit: 4 });
    // Priority quota 1 (p1 skipped, p2), normal lane (n1 skipped, n2), priority again (p3).
    assert.deepEqual(
      result.claimed.map((x) => [x.cardId, x.fromPriority]),
      [
        ['p2', true],
        ['n2', false],
        ['p3', true],
      ],
    );
    assert.equal((await fx.hash(c, 'p2')).prio, '1', 'deferred: back to the priority lane at finish');
    assert.equal((await fx.hash(c, 'p3')).prio, undefined);
    assert.equal(await fx.score(c, 'prio', 'p1'), NOW - 50);
    assert.equal(await fx.score(c, 'queue', 'n1'), NOW - 20);
  });

  test('budget per type: a round skips at most capacity + 100 cards', async () => {
    const c = nextCarrier();
    const skippable = 120;
    await fx.store.upsertMany(
      Array.from({ length: skippable }, (_, i) => ({ carrierId: c, cardId: `d${String(i).padStart(3, '0')}`, now: NOW, dues: { carddata: NOW - 1_000 + i } })),
    );
    await card(c, 'late', { card_status: NOW - 1 });
    assert.deepEqual(
      ids(await claim(c, { typeGroups: SPLIT_GROUPS, groupBudget: { status: 5, data: 0 }, inflightLimit: 2 })),
      [],
      '102 skipped, then the round ends',
    );
    assert.deepEqual(ids(await claim(c, { typeGroups: SPLIT_GROUPS, groupBudget: { status: 5, data: 0 }, inflightLimit: 30, tokenPrefix: 'r2' })), ['late']);
  });

  test('budget per type: every claim overwrites dfr (a stale one of an expired claim is not inherited)', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 20, carddata: NOW - 20 });
    await claim(c, { typeGroups: SPLIT_GROUPS, groupBudget: { status: 5, data: 0 } });
    assert.equal((await fx.hash(c, 'a')).dfr, 'carddata');
    // The run vanished: its lease runs out and an unbudgeted round claims the card again.
    const again = await claim(c, { now: NOW + 1_000, tokenPrefix: 'r2' });
    assert.deepEqual(ids(again), ['a']);
    assert.equal(again.expired, 1);
    assert.equal((await fx.hash(c, 'a')).dfr, undefined);
    // The same through a budgeted round, which reads the stale mark with the due times.
    await claim(c, { now: NOW + 2_000, tokenPrefix: 'r3', typeGroups: SPLIT_GROUPS, groupBudget: { status: 5, data: 0 } });
    assert.equal((await fx.hash(c, 'a')).dfr, 'carddata');
    const budgeted = await claim(c, { now: NOW + 3_000, tokenPrefix: 'r4', typeGroups: SPLIT_GROUPS, groupBudget: { status: 5, data: 5 } });
    assert.deepEqual(ids(budgeted), ['a']);
    assert.equal((await fx.hash(c, 'a')).dfr, undefined);
  });

  test('budget: a group with budget > 0 admits one card even when it needs more', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 30, carddata: NOW - 30 }); // g1: 2 > 1
    await card(c, 'b', { card_status: NOW - 20 });
    assert.deepEqual(ids(await claim(c, { groupBudget: { g1: 1 } })), ['a']);
  });

  test('budget: an exhausted group refuses at once; cards needing no call of it, or another group, pass', async () => {
    const c = nextCarrier();
    await card(c, 'pkg', { package: NOW - 30, card_status: NOW + 99 }); // no gateway call due now
    await card(c, 'a', { card_status: NOW - 20 }); // g1 exhausted: skipped
    await card(c, 'b', { realname: NOW - 10 }); // g2 open
    assert.deepEqual(ids(await claim(c, { groupBudget: { g1: 0, g2: 5 } })), ['pkg', 'b']);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW - 20);
    // Every budgeted group exhausted: the first refused card ends the round.
    const c2 = nextCarrier();
    await card(c2, 'pkg', { package: NOW - 30 });
    await card(c2, 'a', { card_status: NOW - 20 });
    await card(c2, 'b', { package: NOW - 10 });
    assert.deepEqual(ids(await claim(c2, { groupBudget: { g1: 0, g2: 0 } })), ['pkg']);
  });

  test('budget: exact fit continues; group absent from the budget is unlimited; no budget = unlimited', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 30 });
    await card(c, 'b', { card_status: NOW - 20 });
    await card(c, 'r1', { realname: NOW - 15 });
    await card(c, 'r2', { realname: NOW - 12 });
    await card(c, 'c', { card_status: NOW - 10 });
    assert.deepEqual(ids(await claim(c, { groupBudget: { g1: 2 } })), ['a', 'b', 'r1', 'r2']);
    const c2 = nextCarrier();
    for (const id of ['a', 'b', 'c']) await card(c2, id, { card_status: NOW - 1, carddata: NOW - 1 });
    assert.equal((await claim(c2, { groupBudget: undefined })).claimed.length, 3);
    const c3 = nextCarrier();
    for (const id of ['a', 'b', 'c']) await card(c3, id, { card_status: NOW - 1 });
    assert.equal((await claim(c3, { groupBudget: {} })).claimed.length, 3, 'empty budget map = every group unlimited');
  });

  test('budget: realname counted only with real-name control', async () => {
    const c = nextCarrier();
    await card(c, 'a', { realname: NOW - 20 });
    await card(c, 'b', { realname: NOW - 10 });
    assert.deepEqual(ids(await claim(c, { groupBudget: { g2: 1 }, countRealname: true })), ['a']);
    const c2 = nextCarrier();
    await card(c2, 'a', { realname: NOW - 20 });
    await card(c2, 'b', { realname: NOW - 10 });
    assert.deepEqual(ids(await claim(c2, { groupBudget: { g2: 0 }, countRealname: false })), ['a', 'b']);
  });

  test('budget: only types due now count; types without a group are not budgeted', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 20, carddata: NOW + 500 }); // 1 call now
    await card(c, 'b', { card_status: NOW - 10 });
    assert.deepEqual(ids(await claim(c, { groupBudget: { g1: 2 } })), ['a', 'b']);
    const c2 = nextCarrier();
    await card(c2, 'a', { card_status: NOW - 20 });
    await card(c2, 'b', { card_status: NOW - 10 });
    assert.deepEqual(ids(await claim(c2, { groupBudget: { g1: 0 }, typeGroups: {} })), ['a', 'b']);
  });

  test('already-claimed card (e.g. rescored by upsert) is pushed back by its remaining lease and not counted', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 20 });
    await claim(c); // lease until NOW + 1000
    await fx.redis.zadd(fx.keys(c).queue, NOW - 20, 'a'); // e.g. an external rescore
    await card(c, 'b', { card_status: NOW - 10 });
    const result = await claim(c, { now: NOW + 400, tokenPrefix: 'r2', groupBudget: { g1: 1 } });
    assert.deepEqual(ids(result), ['b'], 'a did not consume the budget');
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 1_000, 'now + remaining lease');
    assert.equal(await fx.redis.get(fx.keys(c).claim('a')), tok('r1', 'a'));
  });

  test('orphan claim key (no running entry) is cleared and the card claimed', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 20 });
    await fx.redis.set(fx.keys(c).claim('a'), 'ghost:a', 'PX', 60_000);
    assert.deepEqual(ids(await claim(c)), ['a']);
    assert.equal(await fx.redis.get(fx.keys(c).claim('a')), tok('r1', 'a'));
  });

  test('nothing due: score > now → nothing; cards in no lane are never claimed', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW + 1 });
    assert.deepEqual(await claim(c), { expired: 0, claimed: [] });
  });

  test('invalid arguments → ScriptArgumentError (-2)', async () => {
    const c = nextCarrier();
    const call = claimCall(fx.keys(c), { ...CLAIM_DEFAULTS, now: NOW });
    const args = [...call.args];
    args[1] = 0; // lease 0 would never leave the due range
    const reply = await callScript(fx.redis, call.name, call.keys, args);
    assert.throws(() => expectCode('claim', reply, []), ScriptArgumentError);
  });

  test('a card the round did not declare (due after its candidates were read) waits for the next round; an expired token of one only leaves running', async () => {
    const c = nextCarrier();
    await card(c, 'a', { card_status: NOW - 10 });
    await card(c, 'b', { card_status: NOW - 20 });
    await card(c, 'c', { card_status: NOW + 5_000 });
    await fx.redis.set(fx.keys(c).claim('c'), 'old@1:c');
    await fx.redis.zadd(fx.keys(c).running, NOW - 1, 'old@1:c');
    // The round's candidates were read before b became due; c's keys were not declared either.
    const call = claimCall(fx.keys(c), { ...CLAIM_DEFAULTS, now: NOW, cards: ['a'] });
    const result = parseClaimReply(await callScript(fx.redis, call.name, call.keys, call.args));
    assert.deepEqual(result, { expired: 1, claimed: [{ cardId: 'a', token: tok('r1', 'a'), fromPriority: false }] });
    assert.equal(await fx.score(c, 'queue', 'b'), NOW - 20, 'b untouched, still due');
    assert.equal(await fx.score(c, 'running', 'old@1:c'), null);
    assert.equal(await fx.redis.get(fx.keys(c).claim('c')), 'old@1:c', 'its orphan claim key is cleared when c is next claimed');
    // The next round (through the store: candidates first) takes b, and c once it is due.
    assert.deepEqual(ids(await claim(c, { now: NOW + 1, tokenPrefix: 'r2' })), ['b']);
    assert.ok(ids(await claim(c, { now: NOW + 5_000, tokenPrefix: 'r3' })).includes('c'));
    assert.equal(await fx.redis.get(fx.keys(c).claim('c')), tok('r3', 'c', NOW + 5_000));
  });

  test("now '' → Redis TIME", async () => {
    const c = nextCarrier();
    const serverNow = Date.now();
    await card(c, 'a', { card_status: serverNow - 60_000 });
    const call = claimCall(fx.keys(c), { ...CLAIM_DEFAULTS, now: '', cards: ['a'] });
    const [token] = parseClaimReply(await callScript(fx.redis, call.name, call.keys, call.args)).claimed.map((x) => x.token);
    assert.ok(token !== undefined);
    const claimedAt = Number(/^r1@(\d+):a$/.exec(token)?.[1]);
    assert.ok(Math.abs(claimedAt - serverNow) < 5_000, `claim instant ${claimedAt} in the token is the server's`);
    const expiry = await fx.score(c, 'running', token);
    assert.ok(expiry !== null && Math.abs(expiry - (serverNow + 1_000)) < 5_000, `expiry ${expiry} from server time`);
  });

  test(
    'due horizon: cards and types due up to now + horizon are claimed and budgeted; a card held elsewhere is ' +
      'pushed past the horizon; leases are still judged at now',
    async () => {
      const c = nextCarrier();
      await card(c, 'soon', { card_status: NOW + 400, carddata: NOW + 900 });
      await card(c, 'later', { card_status: NOW + 2_000 });
      await card(c, 'held', { card_status: NOW + 100 });
      await fx.redis.set(fx.keys(c).claim('held'), 'other:held');
      await fx.redis.zadd(fx.keys(c).running, NOW + 300, 'other:held');
      // Without a horizon nothing is due yet.
      assert.deepEqual(ids(await claim(c, { tokenPrefix: 'h0' })), []);
      const result = await claim(c, { tokenPrefix: 'h1', dueHorizonMs: 1_000, groupBudget: { status: 5, data: 1 }, typeGroups: SPLIT_GROUPS });
      assert.deepEqual(ids(result), ['soon']);
      // Both its types fell inside the horizon: both budgeted and run, none deferred.
      assert.equal((await fx.hash(c, 'soon')).dfr, undefined);
      const state = await fx.store.readDue(c, 'soon');
      assert.deepEqual(dueTypes(state, INTERVALS, NOW + 1_000).types, ['card_status', 'carddata']);
      // The held card's claim is alive at now (its lease ends at +300): pushed just past the horizon, not claimed.
      assert.equal(await fx.redis.get(fx.keys(c).claim('held')), 'other:held');
      assert.equal(await fx.score(c, 'queue', 'held'), NOW + 1_001);
      assert.equal(await fx.score(c, 'queue', 'later'), NOW + 2_000);
      // A negative horizon is refused.
      const call = claimCall(fx.keys(c), { ...CLAIM_DEFAULTS, now: NOW, dueHorizonMs: 0 });
      const reply = await callScript(fx.redis, call.name, call.keys, [...call.args.slice(0, 10), -1]);
      assert.throws(() => expectCode('claim', reply, []), ScriptArgumentError);
    },
  );
});
