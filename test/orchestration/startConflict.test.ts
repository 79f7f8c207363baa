/**
 * A card whose earlier run still runs (its records wait for PostgreSQL, say) cannot start a new
 * run under the same workflow id. Its claim is given back with a delay (FAILED_START_RETRY_MS;
 * the child mode's scheduler asks for a shorter one that grows with each refusal in a row,
 * STILL_RUNNING_FIRST_RETRY_MS) instead of being claimed and released every round; an earlier run
 * that closes within a moment (client mode: PREVIOUS_RUN_CLOSE_MAX_MS) is waited for instead: the control
 * activities over real Redis and PostgreSQL, the runs started on the real Temporal server (no
 * worker: a run started here only has to exist).
 *
 * What the scheduler does with a refused start (releases the child's claim, counts it, the other
 * cards run) is test/workflows/carrierScheduler.test.ts; that a released card is claimable only
 * once its delay has passed, test/lua/lease.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackControlActivities, type Stack } from '../../testkit/orchestration.js';
import { seedAccount, type SeedAccount } from '../../testkit/seed.js';
import { createClientCardStarter } from '../../src/app/cardStarter.js';
import { FAILED_START_RETRY_MS, STILL_RUNNING_FIRST_RETRY_MS, type ClaimRoundInput } from '../../src/workflow-safe/claimRound.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { cardWorkflowId } from '../../src/workflow-safe/workflowIds.js';

/** An account of two cards due now, the first of them with a run under its workflow id already. */
async function conflict(stack: Stack, name: string): Promise<{ account: SeedAccount; blocked: string; free: string }> {
  const account = await seedAccount(stack, { name, qps: { main: 20 }, typeGroups: { card_status: 'main' }, cards: 2, intervalsSec: { card_status: 600 } });
  const [blocked, free] = account.cards;
  assert.ok(blocked && free);
  // The "earlier run": on a queue no worker polls, so it stays running.
  await stack.client.workflow.start('cardCheck', {
    taskQueue: `${stack.taskQueues.card}-nobody`,
    workflowId: cardWorkflowId(blocked.id, stack.config.WORKFLOW_ID_PREFIX),
    args: [],
  });
  const now = Date.now() - 1;
  await stack.deps.store.upsertMany(account.cards.map((card) => ({ carrierId: account.carrier.id, cardId: card.id, dues: { card_status: now } })));
  return { account, blocked: blocked.id, free: free.id };
}

function round(stack: Stack, carrierId: string, tokenPrefix: string): ClaimRoundInput {
  return {
    carrierId,
    tokenPrefix,
    refreshConfig: false,
    sinceLastRoundMs: 1000,
    cardRuns: { taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX, claimedBy: 'test' },
  };
}

/** The card's lane score, checked to be the retry delay after a release made between `before` and `after`. */
async function assertWaitsForRetry(stack: Stack, carrierId: string, cardId: string, before: number, after: number): Promise<void> {
  const score = Number(await stack.deps.redis.zscore(stack.deps.store.keys(carrierId).queue, cardId));
  // Redis' clock and this process' agree within a second here (one machine).
  assert.ok(score >= before + FAILED_START_RETRY_MS - 1000, `lane score ${score} is the retry delay after ${before}`);
  assert.ok(score <= after + FAILED_START_RETRY_MS + 1000, `lane score ${score} ≤ ${after} + ${FAILED_START_RETRY_MS}`);
}

test('CARD_START_MODE=client: the claim round starts the runs; the refused card is released with the retry delay and counted, the next round leaves it', async () => {
  const stack = await createStack('start-conflict-client', { config: { CARD_START_MODE: 'client' } });
  try {
    const { account, blocked, free } = await conflict(stack, 'conflict1');
    const carrierId = account.carrier.id;
    const warnings: string[] = [];
    const control = stackControlActivities(stack, {
      cardStartMode: 'client',
      cardStarter: createClientCardStarter(stack.client, (message, fields) => warnings.push(`${message} ${JSON.stringify(fields)}`)),
    });
    const before = Date.now();
    const first = await control.claimRound(round(stack, carrierId, 'run-a.1'));
    const after = Date.now();
    assert.equal(first.kind, 'claimed');
    if (first.kind !== 'claimed') return;
    assert.deepEqual(first.claimed.map((card) => card.cardId).sort(), [blocked, free].sort());
    assert.equal(first.startedByClaim, true);
    assert.equal(first.startFailures, 1);
    assert.equal(warnings.length, 1, warnings.join('\n'));
    // The free card's run was started, carrying its claim.
    const freeRun = await stack.client.workflow.getHandle(cardWorkflowId(free, stack.config.WORKFLOW_ID_PREFIX)).describe();
    assert.equal(freeRun.memo?.token, first.claimed.find((card) => card.cardId === free)?.token);
    // The refused card's claim is gone, the card back in its lane until the retry time.
    const keys = stack.deps.store.keys(carrierId);
    assert.equal(await stack.deps.redis.get(keys.claim(blocked)), null);
    await assertWaitsForRetry(stack, carrierId, blocked, before, after);
    // The next round does not claim it again (it used to, every other tick).
    const next = await control.claimRound(round(stack, carrierId, 'run-a.2'));
    assert.deepEqual(next.kind === 'claimed' ? [next.claimed, next.startFailures] : next, [[], 0]);
  } finally {
    await stack.close();
  }
});

test('CARD_START_MODE=child: releaseClaims gives the refused card back with the retry delay; the next round leaves it', async () => {
  const stack = await createStack('start-conflict-child', { config: { CARD_START_MODE: 'child' } });
  try {
    const { account, blocked, free } = await conflict(stack, 'conflict2');
    const carrierId = account.carrier.id;
    const control = stackControlActivities(stack, { cardStartMode: 'child' });
    const first = await control.claimRound(round(stack, carrierId, 'run-b.1'));
    assert.equal(first.kind, 'claimed');
    if (first.kind !== 'claimed') return;
    // Child mode: the scheduler starts the runs; the claim started none.
    assert.equal(first.startedByClaim, false);
    assert.deepEqual(first.claimed.map((card) => card.cardId).sort(), [blocked, free].sort());
    const refused = first.claimed.filter((card) => card.cardId === blocked);
    // What the scheduler does when the child start is refused.
    const before = Date.now();
    assert.equal(await control.releaseClaims({ carrierId, cards: refused }), 1);
    const after = Date.now();
    await assertWaitsForRetry(stack, carrierId, blocked, before, after);
    const next = await control.claimRound(round(stack, carrierId, 'run-b.2'));
    assert.deepEqual(next.kind === 'claimed' ? next.claimed : next, []);
    // A release of a claim no longer held (released already) is no release.
    assert.equal(await control.releaseClaims({ carrierId, cards: refused }), 0);
  } finally {
    await stack.close();
  }
});

test('CARD_START_MODE=child: a claim released with its own retry (the previous run still open: 0.5 s) is due again that soon, and claimed again once due', async () => {
  const stack = await createStack('start-conflict-retry', { config: { CARD_START_MODE: 'child' } });
  try {
    const { account, blocked } = await conflict(stack, 'conflict4');
    const carrierId = account.carrier.id;
    const control = stackControlActivities(stack, { cardStartMode: 'child' });
    const first = await control.claimRound(round(stack, carrierId, 'run-d.1'));
    assert.equal(first.kind, 'claimed');
    if (first.kind !== 'claimed') return;
    const refused = first.claimed.filter((card) => card.cardId === blocked).map((card) => ({ ...card, retryAfterMs: STILL_RUNNING_FIRST_RETRY_MS }));
    const before = Date.now();
    assert.equal(await control.releaseClaims({ carrierId, cards: refused }), 1);
    const after = Date.now();
    const score = Number(await stack.deps.redis.zscore(stack.deps.store.keys(carrierId).queue, blocked));
    // One machine, one clock (Redis TIME and this process' agree to the millisecond).
    assert.ok(
      score >= before + STILL_RUNNING_FIRST_RETRY_MS - 5 && score <= after + STILL_RUNNING_FIRST_RETRY_MS + 5,
      `lane score ${score - before} ms after the release`,
    );
    await sleep(Math.max(0, score - Date.now()) + 50);
    const next = await control.claimRound(round(stack, carrierId, 'run-d.2'));
    assert.deepEqual(next.kind === 'claimed' ? next.claimed.map((card) => card.cardId) : next, [blocked]);
  } finally {
    await stack.close();
  }
});

test('CARD_START_MODE=client: an earlier run that closes within a moment (its claim finished, its record being written) is waited for; the new run starts with this claim', async () => {
  const stack = await createStack('start-conflict-closing', { config: { CARD_START_MODE: 'client' } });
  try {
    const { account, blocked } = await conflict(stack, 'conflict3');
    const warnings: string[] = [];
    const control = stackControlActivities(stack, {
      cardStartMode: 'client',
      cardStarter: createClientCardStarter(stack.client, (message, fields) => warnings.push(`${message} ${JSON.stringify(fields)}`)),
    });
    const workflowId = cardWorkflowId(blocked, stack.config.WORKFLOW_ID_PREFIX);
    // The earlier run closes 300 ms into the round (as a run does once its record is written).
    const closing = new Promise((resolve) => setTimeout(resolve, 300)).then(() => stack.client.workflow.getHandle(workflowId).terminate('record written'));
    const first = await control.claimRound(round(stack, account.carrier.id, 'run-c.1'));
    await closing;
    assert.equal(first.kind, 'claimed');
    if (first.kind !== 'claimed') return;
    assert.equal(first.startFailures, 0, warnings.join('\n'));
    assert.deepEqual(warnings, []);
    const run = await stack.client.workflow.getHandle(workflowId).describe();
    assert.equal(run.memo?.token, first.claimed.find((card) => card.cardId === blocked)?.token, 'the run under the id carries this claim');
    assert.notEqual(await stack.deps.redis.get(stack.deps.store.keys(account.carrier.id).claim(blocked)), null, 'the claim is held, not released');
  } finally {
    await stack.close();
  }
});
