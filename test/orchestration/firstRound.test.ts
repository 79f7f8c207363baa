/**
 * A scheduler's first claim round, before its adaptive in-flight limit exists (a new account, a
 * scheduler started afresh): the claim takes at most the controller's first limit, not the
 * account's configured one — 200 runs at once from each of the bench's two fresh capacity
 * accounts queued for up to 18 s on a 20 s lease (docs/design.md §8.1). The real claim round
 * activity over the stack's Redis and PostgreSQL.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inflightLimitOf, initialInflightControl } from '../../src/workflow-safe/inflightControl.js';
import { createStack, stackControlActivities } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';

test("a scheduler's first claim takes the in-flight controller's first limit, not the configured one", async () => {
  const stack = await createStack('first-round');
  try {
    const account = await seedAccount(stack, {
      name: 'first1',
      qps: { main: 500 },
      typeGroups: { card_status: 'main' },
      cards: 30,
      intervalsSec: { card_status: 600 },
      carrier: { inflightLimit: 50 },
    });
    const carrierId = account.carrier.id;
    const now = Date.now() - 1;
    await stack.deps.store.upsertMany(account.cards.map((card) => ({ carrierId, cardId: card.id, dues: { card_status: now } })));
    const activities = stackControlActivities(stack);
    const round = (n: number, adaptiveLimit?: number) =>
      activities.claimRound({
        carrierId,
        tokenPrefix: `first.${n}`,
        refreshConfig: false,
        sinceLastRoundMs: 1000,
        ...(adaptiveLimit === undefined ? {} : { adaptiveLimit }),
        cardRuns: { taskQueues: stack.taskQueues, workflowIdPrefix: '', claimedBy: 'test' },
      });
    const first = await round(1);
    assert.equal(first.kind, 'claimed');
    if (first.kind !== 'claimed') return;
    const firstLimit = inflightLimitOf(initialInflightControl(50, 500));
    assert.equal(firstLimit, 10);
    assert.equal(first.claimed.length, firstLimit, '30 due, 500 QPS of budget, 50 allowed: the first limit is what is claimed');
    assert.equal(first.limitedBy, 'orchestration');
    // From the second round on the scheduler's limit applies, up to the configured one.
    const second = await round(2, 40);
    assert.equal(second.kind === 'claimed' ? second.claimed.length : -1, 20);
  } finally {
    await stack.close();
  }
});
