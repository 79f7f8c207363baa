/**
 * Under overload the scheduler's adaptive in-flight limit is full all the time. A request-check must
 * not wait for the account's runs to finish before it is claimed: the claim round lets the priority
 * lane past the adaptive limit by a headroom, never past the account's configured in-flight limit
 * (docs/design.md §8.1). The real claim round activity over the stack's Redis and PostgreSQL.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { priorityInflightLimit } from '../../src/activities/control.js';
import { createStack, stackControlActivities, type Stack } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';

async function fullAccount(stack: Stack, name: string, configuredLimit: number) {
  const account = await seedAccount(stack, {
    name,
    qps: { main: 500 },
    typeGroups: { card_status: 'main' },
    cards: 30,
    intervalsSec: { card_status: 600 },
    carrier: { inflightLimit: configuredLimit },
  });
  const carrierId = account.carrier.id;
  const now = Date.now() - 1;
  await stack.deps.store.upsertMany(account.cards.map((card) => ({ carrierId, cardId: card.id, dues: { card_status: now } })));
  return account;
}

/** The account's claim rounds, one token prefix each, with the scheduler's adaptive limit at 4 unless a round says otherwise. */
function roundsAtAdaptiveLimit4(stack: Stack, activities: ReturnType<typeof stackControlActivities>, carrierId: string) {
  let round = 0;
  return (adaptiveLimit = 4) => {
    round += 1;
    return activities.claimRound({
      carrierId,
      tokenPrefix: `headroom.${round}`,
      refreshConfig: false,
      sinceLastRoundMs: 1000,
      adaptiveLimit,
      cardRuns: { taskQueues: stack.taskQueues, workflowIdPrefix: '', claimedBy: 'test' },
    });
  };
}

test('priorityInflightLimit: a quarter above the limit (at least 2), never above the configured limit', () => {
  assert.equal(priorityInflightLimit(4, 50), 6);
  assert.equal(priorityInflightLimit(40, 50), 50);
  assert.equal(priorityInflightLimit(40, 100), 50);
  assert.equal(priorityInflightLimit(50, 50), 50);
  assert.equal(priorityInflightLimit(10, 10), 10);
});

test('priorityInflightLimit: a priority lane no larger than the headroom goes past whatever runs, never past the configured limit', () => {
  assert.equal(priorityInflightLimit(4, 50, { running: 3, priorityLane: 1 }), 6, 'room enough: the headroom rule');
  assert.equal(priorityInflightLimit(4, 50, { running: 27, priorityLane: 1 }), 28, 'the adaptive limit fell below what runs');
  assert.equal(priorityInflightLimit(4, 50, { running: 27, priorityLane: 2 }), 29);
  assert.equal(priorityInflightLimit(4, 50, { running: 27, priorityLane: 3 }), 6, 'more than the headroom (2): a bulk request keeps to it');
  assert.equal(priorityInflightLimit(4, 50, { running: 27, priorityLane: 0 }), 6);
  assert.equal(priorityInflightLimit(4, 28, { running: 28, priorityLane: 1 }), 28, 'the configured limit holds');
});

test('an account full at its adaptive limit still claims a requested card; the normal lane waits', async () => {
  const stack = await createStack('priority-headroom');
  try {
    const account = await fullAccount(stack, 'headroom1', 50);
    const carrierId = account.carrier.id;
    const activities = stackControlActivities(stack);
    const claimRound = roundsAtAdaptiveLimit4(stack, activities, carrierId);
    const first = await claimRound();
    assert.equal(first.kind === 'claimed' ? first.claimed.length : -1, 4, 'the adaptive limit');
    const full = await claimRound();
    assert.equal(full.kind === 'claimed' ? full.claimed.length : -1, 0, 'full: nothing more from the normal lane');

    const claimedIds = new Set(first.kind === 'claimed' ? first.claimed.map((c) => c.cardId) : []);
    const waiting = account.cards.filter((card) => !claimedIds.has(card.id)).slice(0, 3);
    for (const card of waiting) {
      const answer = await activities.requestCheck({ carrierId, request: { cardId: card.id, types: ['card_status'], cooldownMs: 0 } });
      assert.equal(answer.requested, 1);
    }
    const withRequests = await claimRound();
    assert.equal(withRequests.kind, 'claimed');
    if (withRequests.kind !== 'claimed') return;
    // Headroom at limit 4: 2 (at least 2) → 6 in flight: two of the three requests now, all priority.
    assert.deepEqual(
      withRequests.claimed.map((c) => [c.cardId, c.fromPriority]),
      waiting.slice(0, 2).map((card) => [card.id, true]),
    );
    assert.equal(withRequests.running, 6);
    assert.equal(withRequests.limitedBy, 'orchestration');
  } finally {
    await stack.close();
  }
});

test('a requested card is claimed at once when the adaptive limit fell below what runs; a bulk request keeps to the headroom', async () => {
  const stack = await createStack('priority-past-running');
  try {
    const account = await fullAccount(stack, 'headroom3', 50);
    const carrierId = account.carrier.id;
    const activities = stackControlActivities(stack);
    const claimRound = roundsAtAdaptiveLimit4(stack, activities, carrierId);
    const first = await claimRound();
    assert.equal(first.kind === 'claimed' ? first.claimed.length : -1, 4);
    // The limit falls to 2 (headroom 2): 4 running is already at limit + headroom.
    const full = await claimRound(2);
    assert.equal(full.kind === 'claimed' ? full.claimed.length : -1, 0);

    const claimedIds = new Set(first.kind === 'claimed' ? first.claimed.map((c) => c.cardId) : []);
    const waiting = account.cards.filter((card) => !claimedIds.has(card.id));
    const request = async (cardId: string): Promise<void> => {
      const answer = await activities.requestCheck({ carrierId, request: { cardId, types: ['card_status'], cooldownMs: 0 } });
      assert.equal(answer.requested, 1);
    };
    await request(waiting[0]!.id);
    const one = await claimRound(2);
    assert.equal(one.kind, 'claimed');
    if (one.kind !== 'claimed') return;
    assert.deepEqual(
      one.claimed.map((c) => [c.cardId, c.fromPriority]),
      [[waiting[0]!.id, true]],
      'the request is claimed in the round it wakes, past the 4 already running',
    );
    assert.equal(one.running, 5);

    // Three more requests: the priority lane (the one claimed plus three waiting) is larger than the headroom.
    for (const card of waiting.slice(1, 4)) await request(card.id);
    const bulk = await claimRound(2);
    assert.equal(bulk.kind === 'claimed' ? bulk.claimed.length : -1, 0, 'a bulk request waits for the running set to drain to limit + headroom');
  } finally {
    await stack.close();
  }
});

test('the headroom never goes past the configured in-flight limit', async () => {
  const stack = await createStack('priority-headroom-cap');
  try {
    const account = await fullAccount(stack, 'headroom2', 4);
    const carrierId = account.carrier.id;
    const activities = stackControlActivities(stack);
    const claimRound = roundsAtAdaptiveLimit4(stack, activities, carrierId);
    const first = await claimRound();
    assert.equal(first.kind === 'claimed' ? first.claimed.length : -1, 4);
    const claimedIds = new Set(first.kind === 'claimed' ? first.claimed.map((c) => c.cardId) : []);
    const requested = account.cards.find((card) => !claimedIds.has(card.id))!;
    await activities.requestCheck({ carrierId, request: { cardId: requested.id, types: ['card_status'], cooldownMs: 0 } });
    const second = await claimRound();
    assert.equal(second.kind === 'claimed' ? second.claimed.length : -1, 0, 'the configured limit holds, priority or not');
    assert.equal(second.kind === 'claimed' ? second.limitedBy : undefined, 'inflight');
  } finally {
    await stack.close();
  }
});
