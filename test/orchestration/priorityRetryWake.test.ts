/**
 * A priority item whose attempt failed retryably goes back to pending with a next run 5 s on; the
 * account's claim loop may be asleep past it (its idle mark bounded by the next retry it read when
 * it went idle, before this record landed): the record cuts that sleep short, so the retry is not
 * held up for the whole idle sleep (a minute by default). The card services over the stack's own
 * PostgreSQL and Redis, no worker; the sleeping loop is its idle mark (lua/markIdle.lua).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';
import { accountKeys } from '../../src/redis/keys.js';
import type { ExecutionPlanRun } from '../../src/workflow-safe/cardRun.js';

test('a retryable failure of a priority attempt wakes an account asleep past the retry', async () => {
  const stack = await createStack('priority-retry-wake');
  try {
    const account = await seedAccount(stack, {
      name: 'wake1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 1,
      intervalsSec: { card_status: 3600 },
    });
    const carrierId = account.carrier.id;
    const card = account.cards[0];
    assert.ok(card);
    const requested = await stack.services.requests.requestCheck(carrierId, { cardId: card.id, types: ['card_status'], actor: 'test' });
    assert.equal(requested.status, 'requested');
    const token = 'wake1-token';
    const itemId = await stack.services.priority.claimForExecution({ cardId: card.id, token, leaseMs: 30_000 });
    assert.ok(itemId !== undefined, 'the execution claimed the item');
    // The account went idle while the attempt ran: asleep for a minute.
    const idleKey = accountKeys(stack.redis.namespace, carrierId).idle;
    const sleepsUntil = Date.now() + 60_000;
    await stack.deps.redis.set(idleKey, String(sleepsUntil));

    const plan: ExecutionPlanRun = {
      kind: 'run',
      iccid: card.iccid,
      gatewayAccount: 'wake1-gw',
      types: ['card_status'],
      typeGroups: { card_status: 'main' },
      stepTimeoutMs: 3000,
      totalTimeoutMs: 10_000,
      leaseMs: 30_000,
      earliestDue: Date.now(),
      intervalsMs: { card_status: 3_600_000 },
      priorityItemId: itemId,
      ingestMode: 'sync',
      gatewaySteps: 'local',
    };
    const before = Date.now();
    await stack.services.priority.executionFinished({
      carrierId,
      plan,
      token,
      results: [{ type: 'card_status', outcome: 'failure', errorClass: 'timeout', message: 'no answer', gatewayMs: 3000 }],
      outcome: 'failure',
    });
    const { rows } = await stack.db.pool.query<{ status: string; next_run_at: Date | null }>(
      'SELECT status, next_run_at FROM polling_priority_item WHERE id = $1',
      [itemId],
    );
    assert.equal(rows[0]?.status, 'pending', 'back to pending for a retry');
    const nextRunAt = rows[0]?.next_run_at?.getTime();
    assert.ok(nextRunAt !== undefined && nextRunAt > before && nextRunAt < sleepsUntil, `the retry is due before the sleep ends: ${String(nextRunAt)}`);
    assert.equal(await stack.deps.redis.get(idleKey), null, 'the sleep past the retry was cut short');
  } finally {
    await stack.close();
  }
});
