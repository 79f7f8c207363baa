/**
 * `realname` calls count against the account's budget only when
 * the account has real-name control (as the claim already assumes, lua/claim.lua ARGV[8]).
 * Real Redis, PostgreSQL and simulator; the activities are called directly, no workers.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackCardActivities, type Stack } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';
import { createGatewayActivities } from '../../src/activities/gateway.js';
import type { ExecutionPlanRun } from '../../src/workflow-safe/cardRun.js';

/** Prepares one due realname execution of a fresh account and runs its gateway step; returns the plan and the group window's size after. */
async function realnameStep(stack: Stack, name: string, realnameControl: boolean): Promise<{ plan: ExecutionPlanRun; windowAfter: number }> {
  const account = await seedAccount(stack, {
    name,
    qps: { main: 20 },
    typeGroups: { card_status: 'main', realname: 'main' },
    cards: 1,
    intervalsSec: { realname: 600 },
    carrier: { realnameControl },
  });
  const carrierId = account.carrier.id;
  const cardId = account.cards[0]!.id;
  await stack.deps.store.upsert({ carrierId, cardId, dues: { realname: Date.now() - 1 } });
  const claim = await stack.deps.store.claim({
    carrierId,
    leaseMs: 60_000,
    inflightLimit: 10,
    priorityRatio: 0,
    tokenPrefix: `${name}.1`,
    typeGroups: { realname: 'main' },
    countRealname: realnameControl,
  });
  const token = claim.claimed[0]!.token;
  const card = stackCardActivities(stack);
  const plan = await card.prepareExecution({ carrierId, cardId, token, executorId: 'run-1', fromPriority: false });
  assert.equal(plan.kind, 'run');
  const run: ExecutionPlanRun = plan;
  const gateway = createGatewayActivities({ client: stack.deps.gateway, limiter: stack.deps.limiter, store: stack.deps.store });
  const step = await gateway.checkGateway({
    carrierId,
    cardId,
    token,
    executorId: 'run-1',
    leaseMs: run.leaseMs,
    gatewayAccount: run.gatewayAccount,
    iccid: run.iccid,
    type: 'realname',
    group: run.typeGroups['realname'],
    deadlineMs: Date.now() + run.stepTimeoutMs,
  });
  assert.notEqual(step, 'lease_lost');
  assert.equal(step === 'lease_lost' ? undefined : step.outcome, 'success');
  const windowAfter = await stack.deps.redis.zcard(stack.deps.store.keys(carrierId).rateLimit('main'));
  return { plan: run, windowAfter };
}

test('realname takes a limiter slot of its group only when the account has real-name control', async () => {
  const stack = await createStack('realname-budget');
  try {
    const without = await realnameStep(stack, 'rn1', false);
    const withControl = await realnameStep(stack, 'rn2', true);
    assert.deepEqual(
      {
        withoutControl: { group: without.plan.typeGroups['realname'], slots: without.windowAfter },
        withControl: { group: withControl.plan.typeGroups['realname'], slots: withControl.windowAfter },
      },
      { withoutControl: { group: undefined, slots: 0 }, withControl: { group: 'main', slots: 1 } },
    );
    // Other types keep their group either way.
    assert.equal(without.plan.typeGroups['card_status'], 'main');
  } finally {
    await stack.close();
  }
});
