/**
 * markIdle and wakeIfIdle (docs/design.md, 'Idle accounts'): when an account's scheduler may sleep
 * after a round that claimed nothing, and that a due written before its wake-up wakes it once.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createFixture, type Fixture } from './fixture.js';
import { InvalidStoreInputError } from '../../src/redis/storeErrors.js';

const NOW = 9_000_000;
const LONGEST = 60_000;
const SHORTEST = 2_000;
let fx: Fixture;
let carrier = 700;

before(async () => {
  fx = await createFixture('lua-idle');
});
after(async () => {
  await fx.close();
});

const next = (): number => (carrier += 1);
const markIdle = (c: number, horizonMs = 0, now = NOW) => fx.store.markIdle(c, { now, longestMs: LONGEST, horizonMs, shortestMs: SHORTEST });
const mark = async (c: number): Promise<number | null> => {
  const raw = await fx.redis.get(fx.keys(c).idle);
  return raw === null ? null : Number(raw);
};

describe('markIdle', () => {
  test('nothing in the lanes: sleeps the longest sleep, and says until when', async () => {
    const c = next();
    assert.equal(await markIdle(c), LONGEST);
    assert.equal(await mark(c), NOW + LONGEST);
  });

  test("the lanes' next due, less the due horizon, bounds the sleep", async () => {
    const c = next();
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW + 30_000 } });
    await fx.store.upsert({ carrierId: c, cardId: 'b', now: NOW, dues: { card_status: NOW + 45_000 } });
    assert.equal(await markIdle(c, 1_000), 29_000);
    assert.equal(await mark(c), NOW + 29_000);
  });

  test('the priority lane counts as much as the normal one', async () => {
    const c = next();
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW + 50_000 } });
    await fx.store.upsert({ carrierId: c, cardId: 'p', now: NOW, dues: { card_status: NOW + 50_000 } });
    await fx.store.requestCheck({ carrierId: c, cardId: 'p', now: NOW, cooldownMs: 0, lane: 'priority', types: ['card_status'], confirmDelaysSec: [10] });
    const sleep = await markIdle(c);
    assert.ok(sleep <= 10_000, `a priority card due within 10 s bounds the sleep (got ${sleep} ms)`);
  });

  test('a card due within the shortest sleep: keeps ticking, and an older mark is dropped', async () => {
    const c = next();
    assert.equal(await markIdle(c), LONGEST);
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW + SHORTEST - 1 } });
    assert.equal(await markIdle(c), 0);
    assert.equal(await mark(c), null);
  });

  test('a claim in flight: keeps ticking (its finish sets a next due that may be soon)', async () => {
    const c = next();
    await fx.redis.zadd(fx.keys(c).running, NOW + 20_000, 'tok@1:a');
    assert.equal(await markIdle(c), 0);
    assert.equal(await mark(c), null);
  });

  test('an invalid longest sleep is refused before Redis, naming the field', async () => {
    await assert.rejects(() => fx.store.markIdle(next(), { now: NOW, longestMs: 0, horizonMs: 0, shortestMs: SHORTEST }), InvalidStoreInputError);
    await assert.rejects(() => fx.store.markIdle(next(), { now: NOW, longestMs: 0, horizonMs: 0, shortestMs: SHORTEST }), /longestMs/);
  });
});

describe('wakeIfIdle (through the store’s upserts)', () => {
  test('a due before the wake-up wakes the account once; a later one does not', async () => {
    const c = next();
    await fx.store.upsert({ carrierId: c, cardId: 'a', now: NOW, dues: { card_status: NOW + 40_000 } });
    assert.equal(await markIdle(c), 40_000);
    assert.deepEqual(await fx.store.upsert({ carrierId: c, cardId: 'b', now: NOW, dues: { card_status: NOW + 50_000 } }), [], 'due after the wake-up');
    assert.equal(await mark(c), NOW + 40_000, 'the mark stays');
    assert.deepEqual(await fx.store.upsert({ carrierId: c, cardId: 'c', now: NOW, dues: { card_status: NOW + 5_000 } }), [String(c)], 'due before it');
    assert.equal(await mark(c), null, 'the mark is cleared: one wake per sleep');
    assert.deepEqual(await fx.store.upsert({ carrierId: c, cardId: 'd', now: NOW, dues: { card_status: NOW + 1_000 } }), [], 'already woken');
  });

  test('upsertMany names each account to wake once, whatever the number of its cards', async () => {
    const [sleeping, awake, later] = [next(), next(), next()];
    assert.equal(await markIdle(sleeping), LONGEST);
    assert.equal(await markIdle(later), LONGEST);
    const dues = (carrierId: number, at: number) => ['x', 'y', 'z'].map((cardId) => ({ carrierId, cardId, now: NOW, dues: { card_status: at } }));
    const toWake = await fx.store.upsertMany([...dues(sleeping, NOW + 1_000), ...dues(awake, NOW + 1_000), ...dues(later, NOW + LONGEST + 1)]);
    assert.deepEqual(toWake, [String(sleeping)]);
  });
});
