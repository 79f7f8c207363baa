/**
 * The claim round's budget (docs/design.md, 'Claim budget'): a round plans for the group's rate
 * over the coming second, minus calls already waiting for a slot — not for what the limiter's
 * sliding window has left, which still holds the previous round's calls and would settle every
 * account near half its budget.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackCardActivities, stackControlActivities } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';

test("claim round: the previous round's calls in the limiter window do not shrink the next round's budget; waiting calls do", async () => {
  const stack = await createStack('claim-budget');
  try {
    const account = await seedAccount(stack, {
      name: 'budget1',
      qps: { main: 10 },
      typeGroups: { card_status: 'main' },
      cards: 40,
      intervalsSec: { card_status: 600 },
    });
    const carrierId = account.carrier.id;
    const activities = stackControlActivities(stack);
    const dueAll = async (): Promise<void> => {
      const now = Date.now() - 1;
      await stack.deps.store.upsertMany(account.cards.map((card) => ({ carrierId, cardId: card.id, dues: { card_status: now } })));
    };
    const round = (n: number) =>
      activities.claimRound({
        carrierId,
        tokenPrefix: `test.${n}`,
        refreshConfig: false,
        sinceLastRoundMs: 1000,
        // No engine bound: the budget is what is tested (a first round would take the controller's first limit).
        adaptiveLimit: 1000,
        cardRuns: { taskQueues: stack.taskQueues, workflowIdPrefix: '', claimedBy: 'test' },
      });

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

test("claim round: cards due for two groups fill the larger group; the smaller group's types are deferred, not run, and due again", async () => {
  const stack = await createStack('claim-budget-split');
  try {
    const account = await seedAccount(stack, {
      name: 'budget2',
      qps: { status: 10, data: 2 },
      typeGroups: { card_status: 'status', carddata: 'data' },
      cards: 30,
      intervalsSec: { card_status: 600, carddata: 600 },
    });
    const carrierId = account.carrier.id;
    const activities = stackControlActivities(stack);
    const dueAt = Date.now() - 1_000;
    // Staggered dues fix the lane order.
    await stack.deps.store.upsertMany(account.cards.map((card, i) => ({ carrierId, cardId: card.id, dues: { card_status: dueAt + i, carddata: dueAt + i } })));
    const round = await activities.claimRound({
      carrierId,
      tokenPrefix: 'split.1',
      refreshConfig: false,
      sinceLastRoundMs: 1000,
      adaptiveLimit: 1000,
      cardRuns: { taskQueues: stack.taskQueues, workflowIdPrefix: '', claimedBy: 'test' },
    });
    assert.equal(round.kind, 'claimed');
    if (round.kind !== 'claimed') return;
    // The strict rule stopped at the third card (data full): 2 cards, status at 20 % of its budget.
    assert.equal(round.claimed.length, 10, 'one second of the status budget');
    const states = await Promise.all(round.claimed.map((c) => stack.deps.store.readDue(carrierId, c.cardId)));
    assert.deepEqual(
      states.map((state) => state?.deferred.join(',')),
      ['', '', ...Array<string>(8).fill('carddata')],
    );

    // A deferred card's execution runs card_status only; carddata stays due and the card comes back.
    const deferred = round.claimed[2]!;
    const cards = stackCardActivities(stack);
    const plan = await cards.prepareExecution({ carrierId, cardId: deferred.cardId, token: deferred.token, executorId: 'run-1', fromPriority: false });
    if (plan.kind !== 'run') assert.fail(`prepare answered ${plan.kind}`);
    assert.deepEqual(plan.types, ['card_status']);
    const finished = await cards.finishExecution({
      carrierId,
      cardId: deferred.cardId,
      token: deferred.token,
      plan,
      startedAt: Date.now(),
      fromPriority: false,
      workflowId: 'w',
      runId: 'run-1',
      results: [{ type: 'card_status', outcome: 'success', gatewayMs: 5 }],
    });
    assert.equal(finished.owned, true);
    const after = await stack.deps.store.readDue(carrierId, deferred.cardId);
    assert.equal(after?.types.carddata.due, dueAt + 2, 'deferred type untouched');
    assert.ok((after?.types.card_status.due ?? 0) > Date.now(), 'card_status moved to its next interval');
    assert.deepEqual(after?.deferred, []);
    assert.equal(await stack.deps.redis.zscore(stack.deps.store.keys(carrierId).queue, deferred.cardId), String(dueAt + 2), 'due again at once');
  } finally {
    await stack.close();
  }
});
