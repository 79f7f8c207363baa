/**
 * A claim round waits a bounded time for the runs it starts with the client (START_WAIT_MS in
 * src/activities/control.ts); starts still under way then finish in the background, and the
 * claims of those that fail are given back there. A round that waited for every start was as long
 * as its slowest one, and the scheduler's next round (a request-check's claim among them) waited
 * with it. The real claim activity over the stack's Redis and PostgreSQL; the starter is the
 * activity's collaborator, held by the test.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { createStack, stackControlActivities, type Stack } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';
import { BackgroundWork } from '../../src/activities/backgroundWork.js';
import { FAILED_START_RETRY_MS, type ClaimedCard } from '../../src/workflow-safe/claimRound.js';
import type { CardStarter, CardStartRequest } from '../../src/app/cardStarter.js';

/** An account of `cards` cards, all due now; its id. */
async function accountDueNow(stack: Stack, name: string, cards: number): Promise<string> {
  const account = await seedAccount(stack, { name, qps: { main: 50 }, typeGroups: { card_status: 'main' }, cards, intervalsSec: { card_status: 600 } });
  const carrierId = account.carrier.id;
  await stack.deps.store.upsertMany(account.cards.map((card) => ({ carrierId, cardId: card.id, dues: { card_status: Date.now() - 1 } })));
  return carrierId;
}

/** A client-mode round of `carrierId` with an adaptive limit of 10. */
const roundInput = (stack: Stack, carrierId: string, tokenPrefix: string) => ({
  carrierId,
  tokenPrefix,
  refreshConfig: false,
  sinceLastRoundMs: 1000,
  adaptiveLimit: 10,
  cardRuns: { taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX, claimedBy: 'test' },
});

/** A starter whose starts end when the test says, with the cards it names as failed. */
function heldStarter(): { starter: CardStarter; requests: CardStartRequest[]; finish(failed: (cards: readonly ClaimedCard[]) => ClaimedCard[]): void } {
  const requests: CardStartRequest[] = [];
  const waiting: Array<(failed: (cards: readonly ClaimedCard[]) => ClaimedCard[]) => void> = [];
  return {
    requests,
    starter: {
      start: (request) =>
        new Promise((resolve) => {
          requests.push(request);
          waiting.push((failed) => resolve(failed(request.cards)));
        }),
    },
    finish(failed) {
      for (const resolve of waiting.splice(0)) resolve(failed);
    },
  };
}

test('a claim round returns once its wait for slow run starts is over; a start that fails later gives its claim back in the background', async () => {
  const stack = await createStack('slow-starts', { config: { CARD_START_MODE: 'client' } });
  const held = heldStarter();
  try {
    const carrierId = await accountDueNow(stack, 'slow1', 3);
    const logged: string[] = [];
    const background = new BackgroundWork((message) => logged.push(message));
    const control = stackControlActivities(stack, { cardStartMode: 'client', cardStarter: held.starter, background, startWaitMs: 100 });
    const round = control.claimRound(roundInput(stack, carrierId, 'slow.1'));
    // The starts are never finished before the round has returned (or 20 s have passed: the round waited for them).
    const giveUp = new AbortController();
    const returned = await Promise.race([round.then(() => true), sleep(20_000, false, { signal: giveUp.signal }).catch(() => false)]);
    giveUp.abort();
    assert.equal(returned, true, 'the round returned while its starts were still under way');
    const result = await round;
    assert.equal(result.kind, 'claimed');
    if (result.kind !== 'claimed') return;
    assert.equal(result.claimed.length, 3);
    assert.equal(held.requests.length, 1, 'the round handed its three cards to the starter');
    assert.equal(result.startsPending, true);
    assert.equal(result.startFailures, 0, 'no failure known when the round returned');
    assert.equal(background.size, 1);
    assert.equal((await stack.deps.store.depths(carrierId)).running, 3, 'the claims stay held while their runs start');

    // One start fails after the round: its claim is given back, with the retry delay, by the background work.
    const failedCard = result.claimed[0]!;
    const before = Date.now();
    held.finish(() => [failedCard]);
    assert.equal(await background.settle(10_000), 0);
    const after = Date.now();
    assert.equal((await stack.deps.store.depths(carrierId)).running, 2, 'the two started cards keep their claims');
    const score = Number(await stack.deps.redis.zscore(stack.deps.store.keys(carrierId).queue, failedCard.cardId));
    // Redis' clock and this process' agree within a second here (one machine).
    assert.ok(
      score >= before + FAILED_START_RETRY_MS - 1000 && score <= after + FAILED_START_RETRY_MS + 1000,
      `lane score ${score}: the retry delay after the failure`,
    );
    assert.deepEqual(logged, [], 'a failed start is a release, not a failure of the background work');
    // The account's next round reports that failure (nothing else is due: it claims nothing).
    const next = await control.claimRound(roundInput(stack, carrierId, 'slow.2'));
    assert.equal(next.kind === 'claimed' ? next.claimed.length : -1, 0);
    assert.equal(next.kind === 'claimed' ? next.startFailures : -1, 1, 'the late failure is counted once, by the next round');
  } finally {
    held.finish(() => []);
    await stack.close();
  }
});

test('a claim round whose run starts end within its wait reports their failures itself', async () => {
  const stack = await createStack('quick-starts', { config: { CARD_START_MODE: 'client' } });
  try {
    const carrierId = await accountDueNow(stack, 'quick1', 2);
    const background = new BackgroundWork(() => undefined);
    // The starter answers at once, the first card failed; the round waits up to 30 s for it.
    const starter: CardStarter = { start: (request) => Promise.resolve(request.cards.slice(0, 1)) };
    const control = stackControlActivities(stack, { cardStartMode: 'client', cardStarter: starter, background, startWaitMs: 30_000 });
    const result = await control.claimRound(roundInput(stack, carrierId, 'quick.1'));
    assert.equal(result.kind, 'claimed');
    if (result.kind !== 'claimed') return;
    assert.equal(result.claimed.length, 2);
    assert.equal(result.startFailures, 1);
    assert.equal(result.startsPending, undefined);
    assert.equal(background.size, 0);
    assert.equal((await stack.deps.store.depths(carrierId)).running, 1);
  } finally {
    await stack.close();
  }
});

test('a round the in-flight limit stopped says the engine held it back, even when its runs finished during its wait for their starts', async () => {
  const stack = await createStack('slow-starts-limited-by', { config: { CARD_START_MODE: 'client' } });
  try {
    const carrierId = await accountDueNow(stack, 'slow3', 30);
    // Every run has finished (its claim given back) by the time its start returns: the round's
    // later read of the running set finds none of them.
    const finishing: CardStarter = {
      async start(request) {
        for (const card of request.cards) assert.equal(await stack.deps.store.release(carrierId, card.cardId, card.token), true);
        return [];
      },
    };
    const control = stackControlActivities(stack, { cardStartMode: 'client', cardStarter: finishing });
    const result = await control.claimRound(roundInput(stack, carrierId, 'limited.1'));
    assert.equal(result.kind, 'claimed');
    if (result.kind !== 'claimed') return;
    assert.equal(result.claimed.length, 10, 'the adaptive limit stopped the claim');
    assert.equal(result.running, 0, 'none running once the starts returned');
    assert.equal(result.limitedBy, 'orchestration', 'held back by the engine (adaptive limit 10), not by the budget (50 QPS, 10 calls)');
  } finally {
    await stack.close();
  }
});
