import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, type Stack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor, type SeedAccount } from '../../testkit/seed.js';
import { ensurePollingControl, requestCheck, type OrchestrationRef } from '../../src/app/temporalControl.js';
import { PRIORITY_LANE_KEY } from '../../src/workflow-safe/taskQueues.js';

interface ExecutionRow {
  workflow_id: string;
  run_id: string;
  started_at: Date;
  types: string[];
  from_priority: boolean;
  outcome: string;
}

async function executionsSince(stack: Stack, cardId: string, since: Date): Promise<ExecutionRow[]> {
  const { rows } = await stack.db.pool.query<ExecutionRow>(
    'SELECT workflow_id, run_id, started_at, types, from_priority, outcome FROM card_execution WHERE card_id = ' +
      '$1::bigint AND finished_at >= $2 ORDER BY started_at',
    [cardId, since],
  );
  return rows;
}

/** Cards with hour-long intervals: after their first check they only run when asked to. */
async function settledAccount(stack: Stack, ref: OrchestrationRef): Promise<SeedAccount> {
  const account = await seedAccount(stack, {
    name: 'req1',
    qps: { main: 20 },
    typeGroups: { card_status: 'main', carddata: 'main' },
    cards: 6,
    intervalsSec: { card_status: 3600, carddata: 3600 },
    simulator: { latencyMs: { p50: 30, p99: 80 } },
  });
  await stack.startWorkers();
  await ensurePollingControl(ref, { reconcileEveryMs: 2000 });
  // New cards are due within max(interval/10, 2 s) = 6 min: pull them forward so the first checks
  // happen now and every later execution is caused by a request.
  for (const card of account.cards) {
    await stack.deps.store.requestCheck({ carrierId: account.carrier.id, cardId: card.id, cooldownMs: 0, lane: 'normal', types: ['card_status', 'carddata'] });
  }
  await waitFor(
    'first check of every card',
    async () => {
      const { rows } = await stack.db.pool.query<{ n: string }>(`SELECT count(DISTINCT card_id)::text AS n FROM card_execution WHERE outcome = 'success'`);
      return Number(rows[0]?.n) === account.cards.length;
    },
    60_000,
  );
  return account;
}

test('request-check: priority lane, not polled, cooldown, delayed confirmation, request during execution', async (t) => {
  const stack = await createStack('orch-request');
  const ref: OrchestrationRef = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
  try {
    const account = await settledAccount(stack, ref);
    const carrierId = account.carrier.id;
    const [a, b, c, d] = account.cards;
    assert.ok(a && b && c && d);

    await t.test('a polled card runs its requested type through the priority lane', async () => {
      const asked = new Date();
      const result = await requestCheck(ref, carrierId, { cardId: a.id, types: ['card_status'], actor: 'test', source: 'test' });
      assert.deepEqual(result, { status: 'requested', requested: 1, types: { card_status: 'requested' } });
      const [execution] = await waitFor(
        'the requested execution',
        async () => {
          const rows = await executionsSince(stack, a.id, asked);
          return rows.length > 0 ? rows : undefined;
        },
        30_000,
      );
      assert.ok(execution);
      assert.equal(execution.from_priority, true);
      assert.deepEqual(execution.types, ['card_status']);
      // It ran on the priority lane's own task queue, not behind the normal lane's runs.
      const run = await stack.client.workflow.getHandle(execution.workflow_id, execution.run_id).describe();
      assert.equal(run.taskQueue, stack.taskQueues.cardPriority);
      // …and with Temporal priority 1, which its activities inherit on the queues both lanes share.
      assert.equal(run.priority?.priorityKey, PRIORITY_LANE_KEY);
      t.diagnostic(`request → execution finished in ${Date.now() - asked.getTime()} ms`);
      // The durable priority item went pending → processing → completed, each step audited.
      const { rows: items } = await stack.db.pool.query<{ status: string; id: string }>(
        'SELECT id::text, status FROM polling_priority_item WHERE card_id = $1::bigint',
        [a.id],
      );
      await waitFor(
        'item completed',
        async () => {
          const { rows } = await stack.db.pool.query<{ status: string }>('SELECT status FROM polling_priority_item WHERE card_id = $1::bigint', [a.id]);
          return rows[0]?.status === 'completed';
        },
        10_000,
      );
      const { rows: audit } = await stack.db.pool.query<{ action: string }>(
        `SELECT action FROM audit_log WHERE entity_type = 'polling_priority_item' AND entity_id = $1 ORDER BY id`,
        [items[0]?.id],
      );
      assert.deepEqual(
        audit.map((r) => r.action),
        ['created', 'claimed', 'completed'],
      );
    });

    await t.test('inside the cooldown nothing is requested', async () => {
      const result = await requestCheck(ref, carrierId, { cardId: a.id, types: ['card_status'], cooldownMs: 600_000 });
      assert.deepEqual(result, { status: 'cooldown', requested: 0, types: { card_status: 'cooldown' } });
    });

    await t.test('a card that is not polled answers not_polled', async () => {
      await stack.services.lifecycle.disablePolling(d.id);
      const result = await requestCheck(ref, carrierId, { cardId: d.id, types: ['card_status'] });
      assert.deepEqual(result, { status: 'not_polled', requested: 0, types: { card_status: 'not_polled' } });
    });

    await t.test('types the card is not polled for answer not_polled per type and leave no due time behind', async () => {
      // The account's cards are polled for card_status only (see the seed above).
      const mixed = await requestCheck(ref, carrierId, { cardId: b.id, types: ['card_status', 'realname'] });
      assert.deepEqual(mixed.types, { card_status: mixed.status, realname: 'not_polled' });
      const only = await requestCheck(ref, carrierId, { cardId: c.id, types: ['realname'] });
      assert.deepEqual(only, { status: 'not_polled', requested: 0, types: { realname: 'not_polled' } });
      for (const card of [b, c]) {
        const due = await stack.deps.store.readDue(carrierId, card.id);
        assert.equal(due?.types.realname.due, null, `card ${card.id} got a realname due time`);
      }
      const { rows } = await stack.db.pool.query<{ status: string; failure_reason: string | null }>(
        'SELECT status, failure_reason FROM polling_priority_item WHERE card_id = $1 ORDER BY id DESC LIMIT 1',
        [c.id],
      );
      assert.equal(rows[0]?.status, 'failed');
      assert.match(rows[0]?.failure_reason ?? '', /capability not configured/);
    });

    await t.test('invalid input is rejected by the update validator, naming the field', async () => {
      await assert.rejects(requestCheck(ref, carrierId, { cardId: a.id, types: ['sms' as 'card_status'] }), (error: unknown) => {
        // The validator's message travels as the update failure's cause.
        const cause = error instanceof Error ? error.cause : undefined;
        return cause instanceof Error && cause.message.startsWith('types:') && cause.message.includes('"sms"');
      });
    });

    await t.test('delayed confirmation re-checks until the expected state is seen, then stops', async () => {
      await stack.simulator.updateCard(b.iccid, { network: 'offline', afterMs: 2500 });
      const asked = new Date();
      const result = await requestCheck(ref, carrierId, {
        cardId: b.id,
        types: ['card_status'],
        confirmDelaysSec: [1, 1, 1, 1, 1, 1, 1, 1],
        expected: 'offline',
      });
      assert.equal(result.status, 'requested');
      await waitFor(
        'offline observed',
        async () => {
          const { rows } = await stack.db.pool.query<{ network_status: string | null }>('SELECT network_status FROM iot_card WHERE id = $1::bigint', [b.id]);
          return rows[0]?.network_status === 'offline';
        },
        30_000,
      );
      const due = await waitFor(
        'confirmation cleared',
        async () => {
          const state = await stack.deps.store.readDue(carrierId, b.id);
          return state && state.types.card_status.exp === null ? state : undefined;
        },
        10_000,
      );
      assert.deepEqual(due.types.card_status.cfm, []);
      const atConfirm = (await executionsSince(stack, b.id, asked)).length;
      // More than one check (the first saw "online"), and the delays were not all used up.
      assert.ok(atConfirm >= 2 && atConfirm < 9, `executions until confirmed: ${atConfirm}`);
      await new Promise((r) => setTimeout(r, 3000));
      assert.equal((await executionsSince(stack, b.id, asked)).length, atConfirm, 'checks stop once offline is seen');
      assert.ok((due.types.card_status.due ?? 0) > Date.now() + 3_000_000, 'back to the hour-long interval');
    });

    await t.test('a request that arrives while the card executes runs right after it', async () => {
      // Slow the account down so the first execution is surely in flight when the second request lands.
      await stack.simulator.updateAccount(`${account.carrier.name}-gw`, { latencyMs: { p50: 2500, p99: 2600 } });
      const asked = new Date();
      await requestCheck(ref, carrierId, { cardId: c.id, types: ['card_status'] });
      // Its gateway call on the carrier's side, in either run shape (a cardCheck of its own, or a card of a cardBatch).
      await waitFor('card execution running', async () => ((await stack.simulator.stats()).cards?.[c.iccid]?.inflight ?? 0) > 0, 20_000, 100);
      const second = await requestCheck(ref, carrierId, { cardId: c.id, types: ['carddata'] });
      assert.deepEqual(second, { status: 'requested', requested: 1, types: { carddata: 'requested' } });
      await stack.simulator.updateAccount(`${account.carrier.name}-gw`, { latencyMs: { p50: 30, p99: 80 } });
      const rows = await waitFor(
        'the carddata request executed',
        async () => {
          const all = await executionsSince(stack, c.id, asked);
          return all.some((r) => r.types.includes('carddata')) ? all : undefined;
        },
        30_000,
      );
      assert.ok(rows.length >= 2, 'the request made during the first execution got its own execution');
    });
  } finally {
    await stack.close();
  }
});
