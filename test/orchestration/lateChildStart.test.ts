/**
 * A child start the server holds back past the lease: while its scheduler waits for the start, the
 * claim is held (lua/holdClaims.lua, from the claim round), so no later round reclaims it as
 * expired and the run, once started, still owns its card. Before, the overload bench (child mode)
 * saw a start 21 s after its claim on a 20 s lease: the claim was reclaimed (`expired 1`) and the
 * run found it lost.
 *
 * carrierScheduler on the real Temporal dev server, the real claim round over the stack's Redis and
 * PostgreSQL (child start mode); a workflow interceptor asks for every child start 7 s late
 * (test/fixtures/slowChildStartInterceptors.ts) on an account whose lease is 3 s; the card run's
 * activities are scripted: the first one takes the exec right with the run's token, as the real
 * one does, and reports whether its claim was still live.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { createStack, stackControlActivities, type Stack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { connectTestEnv, uniqueName } from '../../testkit/temporal.js';
import { installQuietWorkerRuntime } from '../../testkit/isolatedStack.js';
import { createTestWorker, preparingOnly, testTaskQueues, type CardRunActivities, type ControlActivities } from '../../testkit/workflowTest.js';
import { carrierScheduler } from '../../src/workflows/carrierScheduler.js';
import { SLOW_CHILD_START_MS } from '../fixtures/slowChildStartInterceptors.js';

const LEASE_MS = 3000;

let stack: Stack;
let env: TestWorkflowEnvironment;
before(async () => {
  // Before the stack's connections create the SDK runtime (createTestWorker installs it too, as a no-op then).
  installQuietWorkerRuntime();
  env = await connectTestEnv();
  stack = await createStack('late-child-start', { config: { CARD_START_MODE: 'child', CARD_RUN_SHAPE: 'card' } });
});
after(async () => {
  await stack?.close();
  await env?.teardown();
});

test('a child started after its lease would have ended still owns its card: its scheduler held the claim meanwhile', async (t) => {
  const account = await seedAccount(stack, {
    name: 'latestart',
    qps: { main: 50 },
    typeGroups: { card_status: 'main' },
    cards: 1,
    intervalsSec: { card_status: 600 },
    carrier: { leaseMs: LEASE_MS, totalTimeoutMs: LEASE_MS, stepTimeoutMs: 1000 },
  });
  const carrierId = account.carrier.id;
  const cardId = account.cards[0]?.id ?? '';
  await stack.deps.store.upsertMany([{ carrierId, cardId, dues: { card_status: Date.now() - 1 } }]);

  const control = stackControlActivities(stack);
  const rounds: { expired: number; claimed: string[]; held: number | undefined; holding: number }[] = [];
  const runs: { token: string; exec: string }[] = [];
  const taskQueues = testTaskQueues('late-child-start');
  const taskQueue = taskQueues.control;
  const activities: Pick<ControlActivities, 'claimRound' | 'releaseClaims' | 'requestCheck' | 'requeueDuePriorityItems'> & CardRunActivities = {
    // The real claim round, recorded; once the run has started and three more rounds ran, the scheduler stops.
    async claimRound(input) {
      if (runs.length > 0 && rounds.length >= runs.length + 3 && rounds.length > SLOW_CHILD_START_MS / 1000 + 3)
        return { kind: 'stop', reason: 'carrier_disabled' };
      const result = await control.claimRound(input);
      if (result.kind === 'claimed')
        rounds.push({ expired: result.expired, claimed: result.claimed.map((c) => c.token), held: result.claimsHeld, holding: input.holdClaims?.length ?? 0 });
      return result;
    },
    releaseClaims: (input) => control.releaseClaims(input),
    requestCheck: (input) => control.requestCheck(input),
    requeueDuePriorityItems: (input) => control.requeueDuePriorityItems(input),
    // The run's first step, as the real one: the exec right under the run's token.
    ...preparingOnly(async (input) => {
      const exec = await stack.deps.store.acquireExec(carrierId, input.cardId, input.token, 'late-start-test', LEASE_MS);
      runs.push({ token: input.token, exec });
      if (exec === 'acquired') await stack.deps.store.release(carrierId, input.cardId, input.token);
      return { kind: 'lost' };
    }),
  };
  const worker = await createTestWorker(env, taskQueue, activities, [new URL('../fixtures/slowChildStartInterceptors.ts', import.meta.url)]);
  const handle = await env.client.workflow.start(carrierScheduler, {
    taskQueue,
    workflowId: uniqueName('late-child-start-sched'),
    args: [{ carrierId, taskQueues, workflowIdPrefix: `${taskQueue}-` }],
  });
  t.after(() => handle.terminate('test over').catch(() => undefined));
  await worker.runUntil(async () => {
    assert.deepEqual(await handle.result(), { stopped: 'carrier_disabled' });
  });
  await waitFor('the run to report', async () => runs.length > 0, 1000);

  const first = rounds.find((round) => round.claimed.length > 0);
  assert.ok(first, 'the card was claimed');
  const token = first.claimed[0];
  assert.deepEqual(runs[0], { token, exec: 'acquired' }, 'the late run took the exec right with its own claim');
  assert.equal(
    rounds.reduce((sum, round) => sum + round.expired, 0),
    0,
    'no round reclaimed an expired lease',
  );
  const holding = rounds.filter((round) => round.holding > 0);
  assert.ok(holding.length >= 2, `rounds held the waiting claim (${holding.length})`);
  assert.ok(
    holding.every((round) => round.held === 1),
    'each hold found the claim live and not taken up',
  );
  t.diagnostic(
    `${rounds.length} rounds, ${holding.length} held the claim; the run started ${SLOW_CHILD_START_MS} ms after its claim on a ${LEASE_MS} ms lease`,
  );
});
