/**
 * A scheduler whose workflow task fails or times out after its claim local activity ran loses
 * the round's child starts but not the claims in Redis. The replayed round claims again under the
 * same deterministic token prefix and must get those claims back (to start them) instead of
 * claiming other cards and leaving the first ones to their lease. The second test makes that
 * happen: the scheduler's first workflow task fails (a test interceptor) after its claim ran.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import proto from '@temporalio/proto';
import { createStack, stackControlActivities } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { timeSkippingEnv } from '../../testkit/timeSkipping.js';
import { uniqueName } from '../../testkit/temporal.js';
import { createTestWorker, preparingOnly, type CardRunActivities, type ControlActivities } from '../../testkit/workflowTest.js';
import type { ClaimRoundInput } from '../../src/workflow-safe/claimRound.js';
import { carrierScheduler } from '../../src/workflows/carrierScheduler.js';

const { temporal } = proto;

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

test('a scheduler whose workflow task fails after its claim ran: the replayed round gets the same claims back and starts them', async (t) => {
  const stack = await createStack('claim-recovery-wft');
  const env = await timeSkippingEnv();
  try {
    const account = await seedAccount(stack, {
      name: 'recover2',
      qps: { main: 50 },
      typeGroups: { card_status: 'main' },
      cards: 12,
      intervalsSec: { card_status: 600 },
      // Fewer than the cards due: a claim that did not hand back the first one's would take others.
      carrier: { inflightLimit: 5 },
    });
    const carrierId = account.carrier.id;
    const now = Date.now() - 1;
    await stack.deps.store.upsertMany(account.cards.map((card) => ({ carrierId, cardId: card.id, dues: { card_status: now } })));
    const control = stackControlActivities(stack);
    const claims: { input: ClaimRoundInput; tokens: string[] }[] = [];
    const prepared: string[] = [];
    const taskQueue = uniqueName('claim-recovery-wft');
    const taskQueues = { control: taskQueue, card: taskQueue, cardPriority: taskQueue, gateway: taskQueue, ingest: taskQueue };
    const activities: Pick<ControlActivities, 'claimRound' | 'releaseClaims' | 'requestCheck' | 'requeueDuePriorityItems'> & CardRunActivities = {
      // The real claim round over the stack's Redis (child start mode), recorded; the second round stops the scheduler.
      async claimRound(input) {
        if (!input.tokenPrefix.endsWith('.1')) return { kind: 'stop', reason: 'carrier_disabled' };
        const result = await control.claimRound(input);
        claims.push({ input, tokens: result.kind === 'claimed' ? result.claimed.map((c) => c.token) : [] });
        return result;
      },
      releaseClaims: (input) => control.releaseClaims(input),
      requestCheck: (input) => control.requestCheck(input),
      requeueDuePriorityItems: (input) => control.requeueDuePriorityItems(input),
      // The card runs only report which claim they were started with.
      ...preparingOnly(async (input) => {
        prepared.push(input.token);
        return { kind: 'lost' };
      }),
    };
    const worker = await createTestWorker(env, taskQueue, activities, [new URL('../fixtures/failFirstTaskInterceptors.ts', import.meta.url)]);
    const handle = await env.client.workflow.start(carrierScheduler, {
      taskQueue,
      workflowId: uniqueName('claim-recovery-sched'),
      args: [{ carrierId, taskQueues, workflowIdPrefix: `${taskQueue}-` }],
    });
    assert.deepEqual(await worker.runUntil(handle.result()), { stopped: 'carrier_disabled' });

    const events = (await handle.fetchHistory()).events ?? [];
    const failedTasks = events.filter((e) => e.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED);
    assert.equal(failedTasks.length, 1, 'the first workflow task failed once');
    // The round ran twice under its deterministic token prefix; the second got the first one's claims back.
    assert.equal(claims.length, 2);
    const [first, again] = claims;
    assert.equal(first?.input.tokenPrefix, again?.input.tokenPrefix);
    assert.equal(first?.tokens.length, 5);
    assert.deepEqual(new Set(again?.tokens), new Set(first?.tokens), 'the same claims, handed back');
    // Those claims, and no others, are held in Redis and were started.
    const running = await stack.deps.redis.zrange(stack.deps.store.keys(carrierId).running, 0, -1);
    assert.deepEqual(new Set(running), new Set(first?.tokens));
    await waitFor('the claimed cards’ runs', async () => prepared.length >= 5, 20_000);
    assert.deepEqual(new Set(prepared), new Set(first?.tokens));
    t.diagnostic(`round ${first?.input.tokenPrefix}: ${first?.tokens.length} claims, handed back after the failed task`);
  } finally {
    await env.teardown();
    await stack.close();
  }
});
