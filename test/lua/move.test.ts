/**
 * A card moving to another carrier account (docs/design.md, 'Lifecycle'): removed from the old
 * account first, then upserted under the new one — briefly in neither, never in both, and an
 * execution still running under the old account never puts it back there.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createFixture, CLAIM_DEFAULTS, type Fixture, tokenOf } from './fixture.js';

const NOW = 5_000_000;
/** A token of a claim made at `at` (NOW unless said). */
const tok = (prefix: string, cardId: string, at = NOW): string => tokenOf(prefix, cardId, at);
let fx: Fixture;

before(async () => {
  fx = await createFixture('lua-move');
});
after(async () => {
  await fx.close();
});

/** Accounts whose lanes hold the card, read atomically (MULTI on one server). */
async function accountsHolding(redis: typeof fx.redis, cardId: string, carriers: readonly string[]): Promise<string[]> {
  const multi = redis.multi();
  for (const c of carriers) multi.zscore(fx.keys(c).prio, cardId).zscore(fx.keys(c).queue, cardId);
  const replies = (await multi.exec()) ?? [];
  return carriers.filter((_, i) => replies[2 * i]?.[1] !== null || replies[2 * i + 1]?.[1] !== null);
}

test('executing card moved to another account: old finish does not re-add it, new account owns it', async () => {
  const [from, to] = ['m1', 'm2'];
  await fx.store.upsert({ carrierId: from, cardId: 'x', now: NOW, dues: { card_status: NOW - 1 } });
  await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: from, now: NOW });
  assert.equal(await fx.store.acquireExec(from, 'x', tok('r1', 'x'), 'w1', 5_000, NOW), 'acquired');

  await fx.store.remove(from, 'x');
  assert.deepEqual(await accountsHolding(fx.redis, 'x', [from, to]), [], 'in neither between the two steps');
  await fx.store.upsert({ carrierId: to, cardId: 'x', now: NOW + 1, dues: { card_status: NOW + 1 } });
  assert.deepEqual(await accountsHolding(fx.redis, 'x', [from, to]), [to]);

  assert.deepEqual(await fx.store.requestCheck({ carrierId: from, cardId: 'x', now: NOW + 2, cooldownMs: 0, lane: 'priority', types: ['card_status'] }), {
    status: 'not_polled',
  });
  const finished = await fx.store.finish({
    carrierId: from,
    cardId: 'x',
    token: tok('r1', 'x'),
    now: NOW + 3,
    set: { 'due:card_status': NOW + 60_000, 'ok:card_status': NOW + 3 },
    del: [],
  });
  assert.equal(finished, true, 'the old claim is released');
  assert.deepEqual(await accountsHolding(fx.redis, 'x', [from, to]), [to]);
  assert.equal(await fx.redis.exists(fx.keys(from).due('x')), 0, 'old hash not recreated');
  assert.deepEqual(await fx.store.depths(from), { priority: 0, normal: 0, running: 0 });
  const claimed = await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: to, now: NOW + 3, tokenPrefix: 'n1' });
  assert.deepEqual(
    claimed.claimed.map((c) => c.token),
    [tok('n1', 'x', NOW + 3)],
  );
});

test('concurrent observer never sees a card in two accounts while it moves back and forth', async () => {
  const carriers = ['a1', 'a2', 'a3'] as const;
  const cards = ['k1', 'k2', 'k3'];
  const observer = fx.redis.duplicate();
  const where = new Map<string, string>();
  for (const [i, cardId] of cards.entries()) {
    const carrierId = carriers[i % carriers.length]!;
    await fx.store.upsert({ carrierId, cardId, now: NOW, dues: { card_status: NOW } });
    where.set(cardId, carrierId);
  }
  let moving = true;
  let observations = 0;
  const watch = (async () => {
    while (moving) {
      for (const cardId of cards) {
        const holding = await accountsHolding(observer, cardId, carriers);
        assert.ok(holding.length <= 1, `${cardId} seen in ${holding.join(' and ')}`);
        observations += 1;
      }
    }
  })();
  try {
    for (let i = 0; i < 300; i += 1) {
      const cardId = cards[i % cards.length]!;
      const from = where.get(cardId)!;
      const to = carriers[(carriers.indexOf(from as (typeof carriers)[number]) + 1 + (i % 2)) % carriers.length]!;
      const now = NOW + i;
      // Traffic on both accounts in between: requests and claim/finish rounds.
      await fx.store.requestCheck({ carrierId: from, cardId, now, cooldownMs: 0, lane: i % 2 ? 'priority' : 'normal', types: ['carddata'] });
      const round = await fx.store.claim({ ...CLAIM_DEFAULTS, carrierId: from, now, tokenPrefix: `r${i}` });
      await fx.store.moveCarrier({ fromCarrierId: from, carrierId: to, cardId, now, dues: { card_status: now } });
      where.set(cardId, to);
      for (const c of round.claimed) {
        await fx.store.finish({ carrierId: from, cardId: c.cardId, token: c.token, now: now + 1, set: { 'ok:carddata': now }, del: [] });
      }
    }
  } finally {
    moving = false;
    await watch;
    observer.disconnect();
  }
  assert.ok(observations > 100, `observer ran (${observations} observations)`);
  for (const cardId of cards) assert.deepEqual(await accountsHolding(fx.redis, cardId, carriers), [where.get(cardId)]);
});
