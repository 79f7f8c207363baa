/**
 * Mode switch: carrier → legacy → carrier through the pollingControl update.
 * In legacy, claiming stops once in-flight executions drain and lifecycle events only touch
 * PostgreSQL; switching back rebuilds Redis from PostgreSQL (here: from nothing, the namespace is
 * flushed while in legacy) and claiming resumes. No card is lost; the update is idempotent and
 * validated.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { controlStatus, createStack, type Stack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { ensurePollingControl, currentSchedulerStatus, setMode } from '../../src/app/temporalControl.js';
import { accountKeys } from '../../src/redis/keys.js';
import { deleteMatching } from '../../testkit/redis.js';
import type { PollingMode } from '../../src/workflow-safe/pollingMode.js';

const CARDS = 8;

async function executionCount(stack: Stack): Promise<number> {
  const { rows } = await stack.db.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM card_execution');
  return Number(rows[0]?.n);
}

async function simulatorCalls(stack: Stack): Promise<number> {
  return Object.values((await stack.simulator.stats({ cards: false })).accounts).reduce(
    (sum, account) => sum + Object.values(account.groups).reduce((s, group) => s + group.calls, 0),
    0,
  );
}

/** Card runs (either run shape) of this stack that are still running, as Temporal's visibility lists them. */
async function cardRunsRunning(stack: Stack): Promise<number> {
  const query = `WorkflowId STARTS_WITH "${stack.config.WORKFLOW_ID_PREFIX}" AND ExecutionStatus = "Running" AND (WorkflowType = "cardCheck" OR WorkflowType = "cardBatch")`;
  let running = 0;
  for await (const execution of stack.client.workflow.list({ query })) if (execution.workflowId.startsWith(stack.config.WORKFLOW_ID_PREFIX)) running += 1;
  return running;
}

/** Both lanes, read separately: `laneOf` alone cannot tell "in both" from "in priority". */
async function lanesOf(stack: Stack, carrierId: string, cardId: string): Promise<string[]> {
  const keys = accountKeys(stack.redis.namespace, carrierId);
  const [prio, queue] = await Promise.all([stack.redis.redis.zscore(keys.prio, cardId), stack.redis.redis.zscore(keys.queue, cardId)]);
  return [...(prio === null ? [] : ['priority']), ...(queue === null ? [] : ['normal'])];
}

/** Deletes every key of this test's namespace: a Redis loss, as far as this stack can tell. */
async function flushNamespace(stack: Stack): Promise<number> {
  // SCAN per master on a Redis Cluster (test:cluster runs this file too), else the one server.
  return deleteMatching(stack.redis.redis, `${stack.redis.namespace}*`);
}

test('orchestration: carrier → legacy → carrier stops and resumes claiming, lifecycle in legacy touches only PostgreSQL, Redis is rebuilt', async (t) => {
  const began = Date.now();
  // Phase timings in the test output (TAP diagnostics), to see where the time goes.
  const phase = (what: string): void => t.diagnostic(`${((Date.now() - began) / 1000).toFixed(1)} s: ${what}`);
  const stack = await createStack('orch-mode');
  try {
    const account = await seedAccount(stack, {
      name: 'mode1',
      qps: { main: 50 },
      typeGroups: { card_status: 'main' },
      cards: CARDS,
      intervalsSec: { card_status: 2 },
    });
    const carrierId = account.carrier.id;
    const workers = await stack.startWorkers();
    const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref, { reconcileEveryMs: 2000 });
    await waitFor(
      'an execution of every card in carrier mode',
      async () => {
        const { rows } = await stack.db.pool.query<{ n: string }>('SELECT count(DISTINCT card_id)::text AS n FROM card_execution');
        return Number(rows[0]?.n) === CARDS;
      },
      40_000,
    );
    phase('every card executed in carrier mode');

    // The update's validator rejects an unknown mode before anything runs.
    const bogus: string = 'paused';
    await assert.rejects(setMode(ref, bogus as PollingMode), (error: unknown) => {
      assert.ok(error instanceof WorkflowUpdateFailedError, String(error));
      assert.match(String(error.cause?.message), /mode must be "carrier" or "legacy"/);
      return true;
    });
    assert.equal((await controlStatus(ref)).mode, 'carrier', 'a rejected switch changes nothing');

    assert.deepEqual(await setMode(ref, 'legacy'), { mode: 'legacy', changed: true });
    assert.deepEqual(await setMode(ref, 'legacy'), { mode: 'legacy', changed: false }, 'a repeated switch is a no-op');

    // In-flight executions finish; after that nothing is claimed any more.
    await waitFor('in-flight executions to drain', async () => (await stack.deps.store.depths(carrierId)).running === 0, 20_000);
    await waitFor('the scheduler to report idle', async () => (await currentSchedulerStatus(ref, stack.deps.store, carrierId)).mode === 'idle', 10_000);
    // A drained execution may still be writing its record (sync ingest: before its run closes).
    await waitFor('every card run closed', async () => (await cardRunsRunning(stack)) === 0, 20_000);
    phase('legacy: drained');
    const executionsDrained = await executionCount(stack);
    const callsDrained = await simulatorCalls(stack);
    // Every card is due every 2 s: three claim rounds of a claimer still at work would start some.
    const roundsDrained = (await currentSchedulerStatus(ref, stack.deps.store, carrierId)).rounds;
    await waitFor('three more claim rounds', async () => (await currentSchedulerStatus(ref, stack.deps.store, carrierId)).rounds >= roundsDrained + 3, 20_000);
    assert.equal((await currentSchedulerStatus(ref, stack.deps.store, carrierId)).mode, 'idle');
    assert.equal(await executionCount(stack), executionsDrained, 'no execution may start in legacy mode');
    assert.equal(await simulatorCalls(stack), callsDrained, 'no gateway call in legacy mode');

    // Lifecycle in legacy: PostgreSQL only, Redis lanes unchanged.
    const [disabled, ...kept] = account.cards;
    assert.ok(disabled);
    const laneBefore = await stack.deps.store.laneOf(carrierId, disabled.id);
    assert.notEqual(laneBefore, null);
    await stack.services.lifecycle.disablePolling(disabled.id);
    assert.equal(await stack.deps.store.laneOf(carrierId, disabled.id), laneBefore, 'legacy lifecycle must not touch Redis');
    const added = await stack.services.lifecycle.createCard({ iccid: '89860000009999999999', carrierId, status: 'active', enablePolling: true });
    assert.equal(await stack.deps.store.laneOf(carrierId, added.id), null, 'a card created in legacy is not put in a lane');

    // Redis is lost while in legacy; the switch back to carrier has to rebuild it from PostgreSQL.
    assert.ok((await flushNamespace(stack)) > 0);
    assert.deepEqual(await stack.deps.store.depths(carrierId), { priority: 0, normal: 0, running: 0 });

    const switchedAt = new Date();
    assert.deepEqual(await setMode(ref, 'carrier'), { mode: 'carrier', changed: true });
    assert.deepEqual(await setMode(ref, 'carrier'), { mode: 'carrier', changed: false }, 'a repeated switch is a no-op');
    phase('back in carrier mode');

    // Rebuilt before the update returned: every polled card in exactly one lane, the disabled one in none.
    const polled = [...kept, added];
    for (const card of polled) assert.equal((await lanesOf(stack, carrierId, card.id)).length, 1, `card ${card.id} must be in exactly one lane`);
    assert.deepEqual(await lanesOf(stack, carrierId, disabled.id), [], 'the card disabled in legacy must not be polled');

    // Claiming resumes: every polled card (including the one created in legacy) executes again.
    await waitFor(
      'an execution of every polled card after the switch back',
      async () => {
        const { rows } = await stack.db.pool.query<{ card_id: string }>('SELECT DISTINCT card_id::text FROM card_execution WHERE started_at >= $1', [
          switchedAt,
        ]);
        return rows.length >= polled.length ? rows : undefined;
      },
      30_000,
    );
    phase('every polled card executed again');
    const { rows: after } = await stack.db.pool.query<{ card_id: string }>('SELECT DISTINCT card_id::text FROM card_execution WHERE started_at >= $1', [
      switchedAt,
    ]);
    assert.deepEqual(after.map((r) => r.card_id).sort(), polled.map((c) => c.id).sort(), 'exactly the polled cards run after the switch');
    assert.ok((await simulatorCalls(stack)) > callsDrained);
    // Still consistent after executions finished and rescored the cards.
    for (const card of polled) assert.equal((await lanesOf(stack, carrierId, card.id)).length, 1, `card ${card.id} must stay in exactly one lane`);
    assert.deepEqual(await lanesOf(stack, carrierId, disabled.id), []);
    assert.equal((await currentSchedulerStatus(ref, stack.deps.store, carrierId)).mode, 'claiming');
    await workers.stop();
  } finally {
    await stack.close();
  }
});
