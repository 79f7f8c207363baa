/**
 * What the account status counts (docs/design.md, "Keys (`src/redis/keys.ts`)"): the lanes hold
 * every polled card, claimed ones included (a claimed card stays in its lane, scored at its lease
 * end), and `running` holds the claims. So lanes + in-flight = polled cards + in-flight claims: the
 * 1 002 / 1 004 seen for accounts of 1 000 polled cards were 2 and 4 claims in flight, not a read
 * skew (a claim round moves no card between lanes, so a skew could only shift `running`) and not a
 * card in two lanes (I1, test/lua/model.test.ts).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createFixture, CLAIM_DEFAULTS, type Fixture } from './fixture.js';

const NOW = 9_000_000;
const CARDS = 1_000;
let fx: Fixture;

before(async () => {
  fx = await createFixture('lua-depths');
});
after(async () => {
  await fx.close();
});

test('lanes count every polled card, claimed or not; running counts the claims: 1 000 cards with 4 in flight read 1 000 + 4', async () => {
  const c = 1;
  await fx.store.upsertMany(
    Array.from({ length: CARDS }, (_, i) => ({ carrierId: c, cardId: `k${i}`, now: NOW, dues: { card_status: i < 4 ? NOW - 1 : NOW + 60_000 } })),
  );
  await fx.store.requestCheck({ carrierId: c, cardId: 'k1', now: NOW, cooldownMs: 0, lane: 'priority', types: ['card_status'] });
  const round = await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW });
  assert.equal(round.claimed.length, 4);
  const depths = await fx.store.depths(c);
  assert.deepEqual(depths, { priority: 1, normal: CARDS - 1, running: 4 });
  assert.equal(depths.priority + depths.normal + depths.running, 1_004);
  // No card is in both lanes.
  const [prio, queue] = await Promise.all([fx.redis.zrange(fx.keys(c).prio, 0, -1), fx.redis.zrange(fx.keys(c).queue, 0, -1)]);
  assert.deepEqual(
    prio.filter((id) => queue.includes(id)),
    [],
  );
  assert.equal(new Set([...prio, ...queue]).size, CARDS);
});

test('depths are one snapshot: read while claim rounds move cards, lanes always sum to the polled cards and running never exceeds them', async () => {
  const c = 2;
  await fx.store.upsertMany(Array.from({ length: 200 }, (_, i) => ({ carrierId: c, cardId: `s${i}`, now: NOW, dues: { card_status: NOW - 1 } })));
  const rounds = (async () => {
    for (let r = 0; r < 20; r += 1) await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: c, now: NOW + r, inflightLimit: 10 * (r + 1), tokenPrefix: `s${r}` });
  })();
  const reads: { priority: number; normal: number; running: number }[] = [];
  let done = false;
  void rounds.finally(() => (done = true));
  while (!done) reads.push(await fx.store.depths(c));
  await rounds;
  reads.push(await fx.store.depths(c));
  for (const read of reads) {
    assert.equal(read.priority + read.normal, 200, JSON.stringify(read));
    assert.ok(read.running <= 200, JSON.stringify(read));
  }
  assert.equal(reads.at(-1)?.running, 200);
});
