/**
 * An account created behind the API's back — a row inserted by hand in SQL, as an import, the
 * lifecycle service or the demo would — gets its scheduler without waiting for the periodic
 * reconcile: pollingControl here re-reads accounts only once an hour, so what starts the scheduler
 * is the control worker hearing PostgreSQL announce the change. The same after the worker's
 * LISTEN connection is lost.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { controlStatus, createStack, type Stack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { createPollingConfig } from '../../src/db/pollingConfigs.js';
import { ensurePollingControl, type OrchestrationRef } from '../../src/app/temporalControl.js';
import { pollingControlWorkflowId, schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';

/** Long enough that the periodic reconcile cannot be what starts a scheduler in this test. */
const RECONCILE_EVERY_MS = 3_600_000;
/** Generous: the assertion is that the scheduler starts at all, not how fast (benchmarks measure that). */
const WAIT_MS = 30_000;

/** Inserts an account, its rate-limit group and type mapping with plain SQL, as a person or an import would. */
async function insertAccountBySql(stack: Stack, name: string): Promise<string> {
  const client = await stack.db.pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ id: string }>(
      `INSERT INTO carrier_account (name, gateway_account, lease_ms, step_timeout_ms, total_timeout_ms, backoff_base_ms)
       VALUES ($1, $2, 20000, 3000, 10000, 1000) RETURNING id::text`,
      [name, `${name}-gw`],
    );
    const id = rows[0]!.id;
    await client.query(`INSERT INTO rate_limit_group (carrier_id, name, qps) VALUES ($1::bigint, 'main', 20)`, [id]);
    await client.query(`INSERT INTO check_type_group (carrier_id, check_type, group_name) VALUES ($1::bigint, 'card_status', 'main')`, [id]);
    await client.query('COMMIT');
    return id;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** Gives the account a card due every 2 s (through the lifecycle service, which the account does not go through). */
async function addCard(stack: Stack, carrierId: string, name: string, n: number): Promise<string> {
  await createPollingConfig(stack.db.pool, { name: `${name}-intervals`, priority: 10, match: { carrierId }, intervalsSec: { card_status: 2 } });
  await stack.simulator.updateAccount(`${name}-gw`, {
    groups: { main: 20 },
    typeGroups: { card_status: 'main' },
    latencyMs: { p50: 5, p99: 20 },
    errorRate: 0,
  });
  const card = await stack.services.lifecycle.createCard({
    iccid: `89860000777${String(n).padStart(9, '0')}`,
    carrierId,
    status: 'active',
    enablePolling: true,
  });
  return card.id;
}

async function schedulerRunning(stack: Stack, ref: OrchestrationRef, carrierId: string): Promise<boolean> {
  const description = await stack.client.workflow
    .getHandle(schedulerWorkflowId(carrierId, ref.workflowIdPrefix))
    .describe()
    .catch(() => undefined);
  return description?.status.name === 'RUNNING';
}

/** The control worker's LISTEN backend in this stack's schema (src/workers/reconcileOnAccountChange.ts names it). */
async function listenerBackend(stack: Stack): Promise<number | undefined> {
  const { rows } = await stack.db.pool.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query ILIKE 'LISTEN%'`, [
    `account-changes(${stack.db.schema})`.slice(0, 63),
  ]);
  return rows[0]?.pid;
}

test('orchestration: an account inserted by hand in SQL gets its scheduler and is polled without the periodic reconcile', async (t) => {
  const began = Date.now();
  const phase = (what: string): void => t.diagnostic(`${((Date.now() - began) / 1000).toFixed(1)} s: ${what}`);
  const stack = await createStack('orch-account-notify');
  try {
    // An account that exists before pollingControl starts: its scheduler marks the first reconcile as done.
    const first = await seedAccount(stack, {
      name: 'notify1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 1,
      intervalsSec: { card_status: 2 },
    });
    const workers = await stack.startWorkers();
    const ref: OrchestrationRef = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref, { reconcileEveryMs: RECONCILE_EVERY_MS });
    await waitFor('the first reconcile', async () => (await controlStatus(ref).catch(() => undefined))?.carriers.includes(first.carrier.id), WAIT_MS);
    assert.ok(await schedulerRunning(stack, ref, first.carrier.id));
    phase('first reconcile done');
    // Both loops run with the longer task timeout (src/workflow-safe/loopTaskTimeout.ts), so a
    // replay on a loaded worker can outlast 10 s without the task timing out again and again.
    for (const workflowId of [pollingControlWorkflowId(ref.workflowIdPrefix), schedulerWorkflowId(first.carrier.id, ref.workflowIdPrefix)]) {
      const described = await stack.client.workflow.getHandle(workflowId).describe();
      assert.equal(Number(described.raw.executionConfig?.defaultWorkflowTaskTimeout?.seconds ?? 0), 30, `${workflowId}: workflow task timeout`);
    }

    // Behind the API's back: nobody asks pollingControl for anything.
    const second = await insertAccountBySql(stack, 'notify2');
    const secondCard = await addCard(stack, second, 'notify2', 2);
    phase(`account ${second} inserted by SQL`);
    await waitFor(`a running scheduler of account ${second}`, () => schedulerRunning(stack, ref, second), WAIT_MS);
    phase(`scheduler of account ${second} running`);
    assert.ok((await controlStatus(ref)).carriers.includes(second), 'pollingControl reconciled after the insert');
    await waitFor(
      `an execution of card ${secondCard}`,
      async () => (await stack.db.pool.query('SELECT 1 FROM card_execution WHERE card_id = $1::bigint LIMIT 1', [secondCard])).rowCount === 1,
      WAIT_MS,
    );
    phase(`card ${secondCard} of account ${second} executed`);

    // The listener's connection is lost (a database restart, a proxy closing it): it comes back and still hears.
    const lost = await waitFor('the control worker’s LISTEN backend', () => listenerBackend(stack), WAIT_MS);
    await stack.db.pool.query('SELECT pg_terminate_backend($1)', [lost]);
    await waitFor(
      'a new LISTEN backend',
      async () => {
        const pid = await listenerBackend(stack);
        return pid !== undefined && pid !== lost;
      },
      WAIT_MS,
    );
    const third = await insertAccountBySql(stack, 'notify3');
    await waitFor(`a running scheduler of account ${third}`, () => schedulerRunning(stack, ref, third), WAIT_MS);
    phase(`after a lost LISTEN connection: scheduler of account ${third} running`);
    await workers.stop();
  } finally {
    await stack.close();
  }
});
