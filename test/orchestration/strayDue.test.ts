/**
 * A due time for a type the card is not polled for, through the card activities themselves (real
 * Redis and PostgreSQL, no workers): the finish of the first run after a config change drops it,
 * and a preparation never drops a type on configs older than the due it finds (the reference
 * cache may be a few seconds old while a rebuild adds the type).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackCardActivities, type Stack } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';
import { listPollingConfigs, updatePollingConfig } from '../../src/db/pollingConfigs.js';
import type { CheckType } from '../../src/workflow-safe/checkTypes.js';
import type { StepResult } from '../../src/workflow-safe/cardRun.js';
import type { Intervals } from '../../src/domain/pollingConfig.js';

async function account(stack: Stack, name: string, intervalsSec: Intervals) {
  const seeded = await seedAccount(stack, { name, qps: { main: 50 }, typeGroups: { card_status: 'main' }, cards: 1, intervalsSec });
  const [config] = (await listPollingConfigs(stack.db.pool)).filter((c) => c.match.carrierId === seeded.carrier.id);
  return { carrierId: seeded.carrier.id, cardId: seeded.cards[0]!.id, configId: config!.id };
}

/** Claims the card, prepares it as a run would, finishes it with a success per planned type. */
async function runOnce(stack: Stack, carrierId: string, cardId: string, prefix: string) {
  const claim = await stack.deps.store.claim({
    carrierId,
    leaseMs: 60_000,
    inflightLimit: 10,
    priorityRatio: 0,
    tokenPrefix: prefix,
    typeGroups: {},
    countRealname: false,
  });
  const token = claim.claimed.find((c) => c.cardId === cardId)?.token;
  assert.ok(token, `card ${cardId} claimed`);
  const activities = stackCardActivities(stack);
  const plan = await activities.prepareExecution({ carrierId, cardId, token, executorId: `${prefix}-run`, fromPriority: false });
  if (plan.kind !== 'run') assert.fail(`prepare answered ${plan.kind}`);
  const results: StepResult[] = plan.types.map((type: CheckType) => ({ type, outcome: 'success', gatewayMs: 1 }));
  const finished = await activities.finishExecution({
    carrierId,
    cardId,
    token,
    plan,
    results,
    startedAt: Date.now(),
    fromPriority: false,
    workflowId: `card-${cardId}`,
    runId: `${prefix}-run`,
  });
  assert.equal(finished.owned, true);
  return plan;
}

test('config change before the rebuild reaches the card: the first run drops the stray due, the card is not due again at once', async () => {
  const stack = await createStack('stray-config');
  try {
    const { carrierId, cardId, configId } = await account(stack, 'stray1', { card_status: 600, realname: 600 });
    await updatePollingConfig(stack.db.pool, configId, { intervalsSec: { card_status: 600 } });
    stack.deps.reference.invalidate();
    // Redis as before the change: both types due (the rebuild has not got here).
    const now = Date.now();
    await stack.deps.store.upsert({ carrierId, cardId, dues: { card_status: now - 1, realname: now - 1 } });
    const plan = await runOnce(stack, carrierId, cardId, 'stray1.1');
    assert.deepEqual(plan.types, ['card_status']);
    const hash = await stack.deps.redis.hgetall(stack.deps.store.keys(carrierId).due(cardId));
    assert.equal(hash['due:realname'], undefined, `stray due kept: ${JSON.stringify(hash)}`);
    const score = Number(await stack.deps.redis.zscore(stack.deps.store.keys(carrierId).queue, cardId));
    assert.ok(score > Date.now() + 500_000, `scored by its next status check, not now: ${score - Date.now()} ms ahead`);
  } finally {
    await stack.close();
  }
});

test('a type a config change just added, with configs cached from before it: the run polls it, its due is kept', async () => {
  const stack = await createStack('stray-cached');
  try {
    const { carrierId, cardId, configId } = await account(stack, 'stray2', { card_status: 600 });
    // This worker's reference data read the configs before the change (it caches them a few seconds).
    await stack.deps.reference.intervals();
    await updatePollingConfig(stack.db.pool, configId, { intervalsSec: { card_status: 600, realname: 600 } });
    // The rebuild brings the new type to the card.
    const now = Date.now();
    await stack.deps.store.upsert({ carrierId, cardId, dues: { card_status: now - 1, realname: now - 1 } });
    const plan = await runOnce(stack, carrierId, cardId, 'stray2.1');
    assert.deepEqual(plan.types, ['card_status', 'realname']);
    const hash = await stack.deps.redis.hgetall(stack.deps.store.keys(carrierId).due(cardId));
    assert.ok(Number(hash['due:realname']) > now + 500_000, `realname polled on: ${JSON.stringify(hash)}`);
  } finally {
    await stack.close();
  }
});
