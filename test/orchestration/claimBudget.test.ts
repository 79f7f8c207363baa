/**
 * The claim round's budget (DESIGN §4.1, §5): a round plans for the group's rate over the coming
 * second, minus calls already waiting for a slot — not for what the limiter's sliding window has
 * left, which still holds the previous round's calls and would settle every account near half its
 * budget.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackControlActivities } from '../helpers/orchestration.js';
import { seedAccount } from '../helpers/seed.js';

test('claim round: the previous round\'s calls in the limiter window do not shrink the next round\'s budget; waiting calls do', async () => {
  const stack = await createStack('claim-budget');
  try {
    const account = await seedAccount(stack, { name: 'budget1', qps: { main: 10 }, typeGroups: { card_status: 'main' }, cards: 40, intervalsSec: { card_status: 600 } });
    const carrierId = account.carrier.id;
    const activities = stackControlActivities(stack);
    const dueAll = async (): Promise<void> => {
      const now = Date.now() - 1;
      await stack.deps.store.upsertMany(account.cards.map((card) => ({ carrierId, cardId: card.id, dues: { card_status: now } })));
    };
    const round = (n: number) =>
      activities.claimRound({ carrierId, tokenPrefix: `test.${n}`, refreshConfig: false, sinceLastRoundMs: 1000, cardRuns: { taskQueues: stack.taskQueues, workflowIdPrefix: '', claimedBy: 'test' } });

    await dueAll();
    const first = await round(1);
    assert.equal(first.kind, 'claimed');
    if (first.kind !== 'claimed') return;
    assert.equal(first.claimed.length, 10, 'a round claims one second of budget');
    // The first round's cards make their ten calls now…
    for (let i = 0; i < 10; i += 1) assert.equal((await stack.deps.limiter.tryAcquire(carrierId, 'main')).granted, true);
    // …and the next round comes one tick later, while those calls are still inside the window.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const second = await round(2);
    assert.equal(second.kind, 'claimed');
    if (second.kind !== 'claimed') return;
    assert.equal(second.claimed.length, 10, `second round claimed ${second.claimed.length} of a budget of 10`);
    assert.equal(second.limitedBy, 'budget');

    // Calls already waiting for a reserved slot take their share of the next second first.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    const waiting = Array.from({ length: 14 }, () => stack.deps.limiter.acquire(carrierId, 'main', { deadline: Date.now() + 5000 }));
    await new Promise((resolve) => setTimeout(resolve, 200));
    const budget = await stack.deps.limiter.roundBudget(carrierId, ['main'], 1);
    assert.equal(budget.main, 6, 'ten calls made now, four waiting for a slot: six left for the next second');
    for (const outcome of await Promise.all(waiting)) assert.equal(outcome.outcome, 'granted');
  } finally {
    await stack.close();
  }
});
