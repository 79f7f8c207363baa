/**
 * pollingControl's reconcile starts the missing schedulers with the client (src/app/schedulerStarter.ts,
 * through the control activity `startMissingSchedulers`): the control activities over the stack's
 * PostgreSQL, the runs started on the real Temporal server with no worker (a started run only has
 * to exist). Every enabled account without a running scheduler gets one, with the loops' task
 * timeout; a disabled account none; a scheduler already running is no failure and is not started again.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackControlActivities } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';
import { createSchedulerStarter } from '../../src/app/schedulerStarter.js';
import { runningSchedulers } from '../../src/app/temporalControl.js';
import { schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { LOOP_WORKFLOW_TASK_TIMEOUT_MS } from '../../src/workflow-safe/loopTaskTimeout.js';
import { waitFor } from '../../testkit/seed.js';

test('startMissingSchedulers: a run per enabled account not running, with the loops’ task timeout; a running one is no failure', async () => {
  const stack = await createStack('orch-sched-start');
  const prefix = stack.config.WORKFLOW_ID_PREFIX;
  const ref = { client: stack.client, workflowIdPrefix: prefix };
  try {
    const accounts = [];
    for (const name of ['s1', 's2', 's3'])
      accounts.push(await seedAccount(stack, { name, qps: { main: 5 }, typeGroups: { card_status: 'main' }, cards: 1, intervalsSec: { card_status: 600 } }));
    const [first, second, disabled] = accounts.map((account) => account.carrier.id);
    assert.ok(first && second && disabled);
    await stack.db.pool.query('UPDATE carrier_account SET enabled = false WHERE id = $1', [disabled]);
    const logged: string[] = [];
    const activities = stackControlActivities(stack, {
      runningSchedulers: () => runningSchedulers(ref),
      schedulerStarter: createSchedulerStarter(stack.client, (message) => void logged.push(message)),
    });
    // Their queue: no worker polls it here, so the runs stay running.
    const template = { taskQueues: { ...stack.taskQueues, control: `${stack.taskQueues.control}-nobody` }, workflowIdPrefix: prefix };

    const firstReconcile = await activities.startMissingSchedulers(template);
    assert.deepEqual([[...firstReconcile.enabled].sort(), firstReconcile.started, firstReconcile.failed], [[first, second].sort(), 2, 0]);
    for (const carrierId of [first, second]) {
      const described = await stack.client.workflow.getHandle(schedulerWorkflowId(carrierId, prefix)).describe();
      assert.equal(described.status.name, 'RUNNING');
      assert.equal(described.type, 'carrierScheduler');
      assert.equal(described.taskQueue, template.taskQueues.control);
      const history = await stack.client.workflow.getHandle(schedulerWorkflowId(carrierId, prefix)).fetchHistory();
      const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
      assert.equal(Number(started?.workflowTaskTimeout?.seconds ?? 0) * 1000, LOOP_WORKFLOW_TASK_TIMEOUT_MS);
      assert.equal(started?.parentWorkflowExecution ?? null, null, 'started with the client, not as a child');
    }
    await assert.rejects(stack.client.workflow.getHandle(schedulerWorkflowId(disabled, prefix)).describe(), /not found/i);

    // Once visibility lists both, a reconcile starts none.
    await waitFor('visibility listing both', async () => (await runningSchedulers(ref)).size === 2, 30_000);
    const again = await activities.startMissingSchedulers(template);
    assert.deepEqual([again.started, again.failed], [0, 0]);

    // Visibility lagging (it lists none): both starts are refused as already running, no failure, nothing logged.
    const starter = createSchedulerStarter(stack.client, (message) => void logged.push(message));
    const lagging = await starter([first, second].map((carrierId) => ({ ...template, carrierId })));
    assert.deepEqual([lagging.started, lagging.alreadyRunning, lagging.failed], [0, 2, []]);
    assert.deepEqual(logged, []);
  } finally {
    await stack.close();
  }
});
