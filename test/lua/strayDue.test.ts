/**
 * A due time for a type the card is not polled for: never written back by a finish, dropped by
 * the first finish that knows the type is not polled any more, never a card claimed every round
 * with nothing to run (docs/design.md, "Lua scripts (`lua/`)": finish, upsert).
 *
 * Each case follows production's path: claim (store), the plan's intervals resolved at preparation,
 * the polled set changed meanwhile by an upsert (status change, rebuild), the finish computed by
 * planFinish from the hash read at finish (as finishExecution does) and written by finish.lua.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createFixture, CLAIM_DEFAULTS, type Fixture, tokenOf } from './fixture.js';
import type { CheckType } from '../../src/workflow-safe/checkTypes.js';
import type { StepResult } from '../../src/workflow-safe/cardRun.js';
import { dueTypes } from '../../src/workflow-safe/schedule.js';
import { planFinish } from '../../src/domain/finishPlan.js';
import type { ClaimInput } from '../../src/redis/carrierQueueStore.js';

const NOW = 5_000_000;
const MINUTE = 60_000;
const BOTH = { card_status: MINUTE, carddata: MINUTE };
const STATUS_ONLY = { card_status: MINUTE };
let fx: Fixture;
let carrier = 100;

before(async () => {
  fx = await createFixture('lua-stray-due');
});
after(async () => {
  await fx.close();
});

function nextCarrier(): number {
  carrier += 1;
  return carrier;
}

function claim(carrierId: number, over: Partial<ClaimInput> = {}) {
  return fx.store.claim({ ...CLAIM_DEFAULTS, leaseMs: 30_000, carrierId, now: NOW, ...over });
}

const success = (type: CheckType): StepResult => ({ type, outcome: 'success', gatewayMs: 1 });

/** What finishExecution does: the hash read now, the plan's intervals, finish.lua. */
async function finish(
  carrierId: number,
  cardId: string,
  token: string,
  input: { now: number; ran: readonly CheckType[]; intervalsMs: Partial<Record<CheckType, number>>; leaseLost?: boolean },
): Promise<boolean> {
  const state = await fx.store.readDue(carrierId, cardId);
  const plan = planFinish({
    state,
    results: input.ran.map(success),
    intervalsMs: input.intervalsMs,
    backoffBaseMs: 1_000,
    now: input.now,
    random: () => 0.5,
  });
  const reply = await fx.store.finishWithRecord({
    carrierId,
    cardId,
    token,
    now: input.now,
    set: plan.set,
    del: plan.del,
    record: 'r',
    leaseLost: input.leaseLost === true,
  });
  return reply.owned;
}

/** What prepareExecution runs: the due types the card's current intervals poll. */
async function typesToRun(carrierId: number, cardId: string, now: number, intervalsMs: Partial<Record<CheckType, number>>) {
  return dueTypes(await fx.store.readDue(carrierId, cardId), intervalsMs, now).types;
}

describe('a due time for a type the card is not polled for', () => {
  test('a status change removes a type while a run of it is in flight: its finish does not write the due back', async () => {
    const c = nextCarrier();
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW, carddata: NOW } });
    const [claimed] = (await claim(c)).claimed;
    assert.equal(claimed?.token, tokenOf('r1', 'a', NOW));
    // Prepared before the status change: both types run.
    assert.deepEqual(await typesToRun(c, 'a', NOW, BOTH), ['card_status', 'carddata']);
    // The status change (lifecycle: PostgreSQL, then upsert) while the run is in flight.
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW + 10, dues: { card_status: NOW + 20 } });
    assert.equal(await finish(c, 'a', tokenOf('r1', 'a', NOW), { now: NOW + 100, ran: ['card_status', 'carddata'], intervalsMs: BOTH }), true);
    const hash = await fx.hash(c, 'a');
    assert.equal(hash['due:carddata'], undefined, `due:carddata written back: ${JSON.stringify(hash)}`);
    assert.equal(hash['due:card_status'], String(NOW + 20 + MINUTE));
    // A minute on, the card is claimed for its status check and runs it; nothing is left due after.
    const later = NOW + 20 + MINUTE;
    const next = (await claim(c, { now: later, tokenPrefix: 'r2' })).claimed;
    assert.deepEqual(await typesToRun(c, 'a', later, STATUS_ONLY), ['card_status']);
    assert.equal(await finish(c, 'a', next[0]?.token ?? '', { now: later + 100, ran: ['card_status'], intervalsMs: STATUS_ONLY }), true);
    assert.deepEqual((await claim(c, { now: later + 1_000, tokenPrefix: 'r3' })).claimed, []);
  });

  test('a lost-lease finish does not write back the due of a type the card left meanwhile', async () => {
    const c = nextCarrier();
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW, carddata: NOW } });
    await claim(c);
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW + 10, dues: { card_status: NOW + 20 * MINUTE } });
    // The run's renew failed: what its steps learned is written as a stale finish.
    assert.equal(
      await finish(c, 'a', tokenOf('r1', 'a', NOW), { now: NOW + 100, ran: ['card_status', 'carddata'], intervalsMs: BOTH, leaseLost: true }),
      false,
    );
    const hash = await fx.hash(c, 'a');
    assert.equal(hash['due:carddata'], undefined, `due:carddata written back: ${JSON.stringify(hash)}`);
    // A stale finish never moves a due later: the current owner decides it.
    assert.equal(hash['due:card_status'], String(NOW + 20 * MINUTE));
  });

  test('a stale finish (lease expired, card claimed again) does not write back a removed type either', async () => {
    const c = nextCarrier();
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW, carddata: NOW } });
    await claim(c);
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW + 10, dues: { card_status: NOW + 20 } });
    await claim(c, { now: NOW + 40_000, tokenPrefix: 'r2' });
    assert.equal(await finish(c, 'a', tokenOf('r1', 'a', NOW), { now: NOW + 40_100, ran: ['carddata'], intervalsMs: BOTH }), false);
    assert.equal((await fx.hash(c, 'a'))['due:carddata'], undefined);
  });

  test('after a config change, before the rebuild reaches the card: the first finish drops the type, the card is not claimed every round', async () => {
    const c = nextCarrier();
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW, carddata: NOW } });
    // The configs now poll card_status only; Redis still has both (the rebuild has not got here).
    const budget = { groupBudget: { g1: 10 } };
    const [first] = (await claim(c, budget)).claimed;
    assert.deepEqual(await typesToRun(c, 'a', NOW, STATUS_ONLY), ['card_status']);
    assert.equal(await finish(c, 'a', first?.token ?? '', { now: NOW + 100, ran: ['card_status'], intervalsMs: STATUS_ONLY }), true);
    const hash = await fx.hash(c, 'a');
    assert.equal(hash['due:carddata'], undefined, `stray due:carddata kept: ${JSON.stringify(hash)}`);
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + MINUTE);
    // The next rounds find nothing to run: the card waits for its status check.
    for (const at of [NOW + 1_000, NOW + 2_000]) assert.deepEqual((await claim(c, { ...budget, now: at, tokenPrefix: `r${at}` })).claimed, []);
  });

  test('a status change that adds a type while a run is in flight: the finish keeps the new due (the upsert is newer than the plan)', async () => {
    const c = nextCarrier();
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW } });
    await claim(c);
    // Prepared for card_status only; then the status change makes carddata polled too.
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW + 10, dues: { card_status: NOW + 20, carddata: NOW + 30 } });
    // The finish's hash read shows carddata, its plan does not poll it: the upsert wins.
    assert.equal(await finish(c, 'a', tokenOf('r1', 'a', NOW), { now: NOW + 100, ran: ['card_status'], intervalsMs: STATUS_ONLY }), true);
    const hash = await fx.hash(c, 'a');
    assert.equal(hash['due:carddata'], String(NOW + 30));
    assert.equal(await fx.score(c, 'queue', 'a'), NOW + 30);
    // The mark is the claim's: the next finish, planned with both types, runs as usual.
    assert.equal(hash.ups, undefined);
  });

  test('claim drops a long-overdue due of a type the account polls no more: not budgeted, not run, the card rescored when nothing else is due', async () => {
    const c = nextCarrier();
    const stale = NOW - 2 * MINUTE;
    // card_status and carddata share g1 (CLAIM_DEFAULTS); the account's configs now poll card_status only.
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: stale, dues: { card_status: NOW - 10, carddata: stale } });
    await fx.store.upsert({ carrierId: c, cardId: 'b', now: stale, dues: { card_status: NOW - 5, carddata: stale } });
    await fx.store.upsert({ carrierId: c, cardId: 'only', now: stale, dues: { card_status: NOW + MINUTE, carddata: stale } });
    await fx.store.requestCheck({ carrierId: c, cardId: 'only', now: stale, cooldownMs: 0, lane: 'normal', types: ['carddata'] });
    const round = await claim(c, { groupBudget: { g1: 2 }, polledTypes: ['card_status', 'package'] });
    // Two status checks fit a budget of 2: the strays took none of it.
    assert.deepEqual(round.claimed.map((x) => x.cardId).sort(), ['a', 'b']);
    for (const id of ['a', 'b', 'only']) {
      const hash = await fx.hash(c, id);
      assert.equal(hash['due:carddata'], undefined, `${id}: ${JSON.stringify(hash)}`);
      assert.equal(hash['req:carddata'], undefined, `${id}: ${JSON.stringify(hash)}`);
    }
    // Nothing left due for `only`: due again at its status check, not claimed to run nothing.
    assert.equal(await fx.score(c, 'queue', 'only'), NOW + MINUTE);
    assert.equal(await fx.redis.get(fx.keys(c).claim('only')), null);
  });

  test('claim keeps a stray due that is not long overdue (a rebuild may just have added the type), and every due when the polled types are not known', async () => {
    const c = nextCarrier();
    await fx.store.upsert({ carrierId: c, cardId: 'young', now: NOW, dues: { carddata: NOW - 1_000 } });
    const young = await claim(c, { groupBudget: { g1: 5 }, polledTypes: ['card_status'] });
    assert.deepEqual(
      young.claimed.map((x) => x.cardId),
      ['young'],
    );
    assert.equal((await fx.hash(c, 'young'))['due:carddata'], String(NOW - 1_000));
    const d = nextCarrier();
    await fx.store.upsert({ carrierId: d, cardId: 'old', now: NOW, dues: { carddata: NOW - 2 * MINUTE } });
    assert.deepEqual(
      (await claim(d, { groupBudget: { g1: 5 } })).claimed.map((x) => x.cardId),
      ['old'],
    );
    assert.equal((await fx.hash(d, 'old'))['due:carddata'], String(NOW - 2 * MINUTE));
  });
});
