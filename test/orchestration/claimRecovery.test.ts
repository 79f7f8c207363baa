/**
 * A scheduler whose workflow task fails or times out after its claim local activity ran loses
 * the round's child starts but not the claims in Redis. The replayed round claims again under the
 * same deterministic token prefix and must get those claims back (to start them) instead of
 * claiming other cards and leaving the first ones to their lease.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackControlActivities } from '../helpers/orchestration.js';
import { seedAccount } from '../helpers/seed.js';

test('a claim round run again under the same token prefix (first attempt) hands back the claims already made', async () => {
  const stack = await createStack('claim-recovery');
  try {
    const account = await seedAccount(stack, {
      name: 'recover1',
      qps: { main: 50 },
      typeGroups: { card_status: 'main' },
      cards: 12,
      intervalsSec: { card_status: 600 },
    });
    const carrierId = account.carrier.id;
    const now = Date.now() - 1;
    await stack.deps.store.upsertMany(account.cards.map((card) => ({ carrierId, cardId: card.id, dues: { card_status: now } })));
    const activities = stackControlActivities(stack);
    const round = () =>
      activities.claimRound({
        carrierId,
        tokenPrefix: 'run-a.7',
        refreshConfig: false,
        sinceLastRoundMs: 1000,
        adaptiveLimit: 5,
        cardRuns: { taskQueues: stack.taskQueues, workflowIdPrefix: '', claimedBy: 'test' },
      });
    const first = await round();
    assert.equal(first.kind, 'claimed');
    if (first.kind !== 'claimed') return;
    assert.equal(first.claimed.length, 5);
    // The workflow task that ran it is lost; its replay runs the round again, as a first attempt.
    const again = await round();
    assert.equal(again.kind, 'claimed');
    if (again.kind !== 'claimed') return;
    assert.deepEqual(new Set(again.claimed.map((c) => c.token)), new Set(first.claimed.map((c) => c.token)), 'the same claims, handed back');
    assert.equal(again.running, 5, 'nothing else claimed');
    // A new round (next prefix) claims normally.
    const next = await activities.claimRound({
      carrierId,
      tokenPrefix: 'run-a.8',
      refreshConfig: false,
      sinceLastRoundMs: 1000,
      adaptiveLimit: 10,
      cardRuns: { taskQueues: stack.taskQueues, workflowIdPrefix: '', claimedBy: 'test' },
    });
    assert.equal(next.kind === 'claimed' ? next.claimed.length : -1, 5);
  } finally {
    await stack.close();
  }
});
