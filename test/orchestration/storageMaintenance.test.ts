/**
 * Storage maintenance on Temporal: the schedule is created once (a second ensure finds it), its
 * immediate first run executes storageMaintenance on the control queue, and the run's activity
 * creates the observation partition the stack's schema lacks.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { waitFor } from '../../testkit/seed.js';
import { ensureStorageMaintenance } from '../../src/app/temporalControl.js';
import { storageMaintenanceScheduleId } from '../../src/workflow-safe/workflowIds.js';
import type { MaintenanceResult } from '../../src/db/retention.js';

test('storage maintenance: an idempotent hourly schedule whose first run creates the missing partition ahead', async (t) => {
  const stack = await createStack('storage-maintenance');
  const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
  const scheduleId = storageMaintenanceScheduleId(ref.workflowIdPrefix);
  t.after(async () => {
    await stack.client.schedule
      .getHandle(scheduleId)
      .delete()
      .catch(() => undefined);
    await stack.close();
  });
  // The migration created this month and the next two; maintenance keeps three ahead, so drop
  // the last one and expect it back.
  const { rows } = await stack.db.pool.query<{ name: string }>(
    'SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = ' +
      "'card_observation'::regclass AND c.relname <> 'card_observation_default' ORDER BY 1 DESC LIMIT 1",
  );
  const last = rows[0]!.name;
  await stack.db.pool.query(`DROP TABLE ${last}`);

  await stack.startWorkers(['control']);
  assert.equal(await ensureStorageMaintenance(ref), true, 'created');
  assert.equal(await ensureStorageMaintenance(ref), false, 'found, not created twice');
  const description = await stack.client.schedule.getHandle(scheduleId).describe();
  assert.deepEqual(
    (description.spec.intervals ?? []).map((interval) => interval.every),
    [3_600_000],
  );

  // The schedule names its runs `<id>-<start time>`: find the immediate one and read its result.
  const run = await waitFor(
    "the schedule's first run to complete",
    async () => {
      for await (const execution of stack.client.workflow.list({ query: `WorkflowType = "storageMaintenance" AND WorkflowId STARTS_WITH "${scheduleId}"` })) {
        if (execution.status.name === 'COMPLETED') return execution;
      }
      return undefined;
    },
    60_000,
    500,
  );
  const result = (await stack.client.workflow.getHandle(run.workflowId, run.runId).result()) as MaintenanceResult;
  assert.deepEqual(result.partitionsCreated, [last]);
  assert.deepEqual(result.partitionsDropped, []);
  assert.equal(result.executionsDeleted, 0);
});
