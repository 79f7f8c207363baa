/**
 * The simulator's freshness ground truth (docs/gateway-contract.md, 'Simulator control endpoints'):
 * cards change by themselves at their account's rate, every change is stamped, and the first answer
 * that carries it counts as learned; a change overtaken before any answer is superseded.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SimWorld } from '../../src/simulator/model.js';
import { startSimulator } from '../../src/simulator/server.js';
import { configureAccount, setCardState, simStats } from './simHelpers.js';

const iccidOf = (i: number): string => `8986${String(i).padStart(15, '0')}`;

test('drift changes rate × cards × hours of an account’s cards; an answer learns a change, a second change supersedes it', () => {
  const world = new SimWorld(7);
  world.updateAccount('a', { changeRatePerHour: { card_status: 0.5 } });
  const iccids = Array.from({ length: 1000 }, (_, i) => iccidOf(i));
  for (const iccid of iccids) world.attach(iccid, 'a');
  const networks = new Map(iccids.map((iccid) => [iccid, world.card(iccid).network]));
  const t0 = Date.parse('2026-12-07T00:00:00Z');
  world.drift(t0);
  assert.equal(world.stats(false).accounts.a?.freshness, undefined, 'nothing owed at the first drift');
  // An hour at half the cards an hour: 500 changes, all stamped at the drift's instant.
  world.drift(t0 + 3_600_000);
  const after = world.stats(false).accounts.a?.freshness?.card_status;
  assert.ok(after);
  assert.equal(after.changes, 500);
  assert.equal(after.learned, 0);
  assert.equal(after.pending + after.superseded, 500);
  // A card drawn twice flipped back: the cards whose network differs are those changed an odd number of times.
  const flipped = iccids.filter((iccid) => world.card(iccid).network !== networks.get(iccid)).length;
  assert.ok(flipped <= after.pending && flipped > 0, `${flipped} cards flipped, ${after.pending} pending`);
  // Every card answered a second later: each pending change learned after exactly 1 000 ms.
  for (const iccid of iccids) world.answered(world.card(iccid), 'card_status', t0 + 3_601_000);
  const learned = world.stats(false).accounts.a?.freshness?.card_status;
  assert.equal(learned?.learned, after.pending);
  assert.equal(learned?.pending, 0);
  assert.deepEqual(learned?.stalenessMs, { p50: 1000, p99: 1000, max: 1000 });
  // Other types do not drift without a rate of their own.
  assert.equal(world.stats(false).accounts.a?.freshness?.realname, undefined);
});

test('a card that moved to another account changes under that one’s rate only', () => {
  const world = new SimWorld(3);
  world.updateAccount('a', { changeRatePerHour: { realname: 1 } });
  world.attach(iccidOf(1), 'a');
  world.attach(iccidOf(1), 'b');
  world.drift(0);
  world.drift(3_600_000);
  assert.equal(world.stats(false).accounts.a?.freshness, undefined, 'the moved card did not change under a');
  assert.equal(world.stats(false).accounts.b?.freshness, undefined, 'b has no rate');
});

test('over HTTP: a set state, a delayed stop, a real-name flip are changes; the next answer learns each; registration takes a whole account', async () => {
  const sim = await startSimulator({ seed: 11 });
  try {
    const check = async (type: string, iccid: string): Promise<Record<string, unknown>> => {
      const res = await fetch(`${sim.url}/v1/checks/${type}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ account: 'fresh', iccid }),
      });
      assert.equal(res.status, 200);
      return (await res.json()) as Record<string, unknown>;
    };
    await configureAccount(sim.url, 'fresh', { latencyMs: { p50: 1, p99: 2 }, realnameFlipRate: 1 });
    // 20 000 cards in one registration (a body far above a check's 16 KiB).
    const res = await fetch(`${sim.url}/sim/accounts/fresh/cards`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ iccids: Array.from({ length: 20_000 }, (_, i) => iccidOf(i)) }),
    });
    assert.deepEqual(await res.json(), { cards: 20_000 });
    const bad = await fetch(`${sim.url}/sim/accounts/fresh/cards`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"iccids":[]}' });
    assert.equal(bad.status, 400);

    const card = iccidOf(5);
    const before = (await check('card_status', card)).observation as { network: string };
    const other = before.network === 'online' ? 'offline' : 'online';
    await setCardState(sim.url, card, { network: other });
    // Set to what it already is: no change.
    await setCardState(sim.url, card, { network: other });
    let fresh = (await simStats(sim.url)).accounts.fresh?.freshness?.card_status;
    assert.deepEqual([fresh?.changes, fresh?.pending, fresh?.learned], [1, 1, 0]);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(((await check('card_status', card)).observation as { network: string }).network, other);
    fresh = (await simStats(sim.url)).accounts.fresh?.freshness?.card_status;
    assert.deepEqual([fresh?.changes, fresh?.pending, fresh?.learned], [1, 0, 1]);
    assert.ok((fresh?.stalenessMs?.p50 ?? 0) >= 50, JSON.stringify(fresh));

    // Two changes before an answer: the first is superseded; a delayed stop counts from when it took effect.
    await setCardState(sim.url, card, { network: before.network });
    await setCardState(sim.url, card, { network: other, afterMs: 30 });
    await new Promise((resolve) => setTimeout(resolve, 60));
    await check('card_status', card);
    fresh = (await simStats(sim.url)).accounts.fresh?.freshness?.card_status;
    assert.deepEqual([fresh?.changes, fresh?.superseded, fresh?.pending, fresh?.learned], [3, 1, 0, 2]);

    // Real name flips after each answer (rate 1): the next answer learns the flip.
    await check('realname', card);
    let names = (await simStats(sim.url)).accounts.fresh?.freshness?.realname;
    assert.deepEqual([names?.changes, names?.pending], [1, 1]);
    await check('realname', card);
    names = (await simStats(sim.url)).accounts.fresh?.freshness?.realname;
    assert.deepEqual([names?.changes, names?.learned, names?.pending], [2, 1, 1]);
  } finally {
    await sim.close();
  }
});
