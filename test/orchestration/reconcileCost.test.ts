/**
 * pollingControl's reconcile starts only the schedulers that do not run (issue 45): a reconcile
 * that tried every enabled account cost a start and its refusal per account every minute (as
 * children: above ~1 000 accounts a continue-as-new at every reconcile). Real Temporal visibility.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { currentSchedulerStatus, ensurePollingControl, runningSchedulers, type OrchestrationRef } from '../../src/app/temporalControl.js';
import { pollingControlWorkflowId, schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { reconcileUpdate } from '../../src/workflows/messages.js';

const WAIT_MS = 30_000;

test('a reconcile with every scheduler running starts none; one whose scheduler ended starts it again', async () => {
  const stack = await createStack('orch-reconcile-cost');
  try {
    const accounts = await Promise.all(
      ['rc1', 'rc2', 'rc3'].map((name) =>
        seedAccount(stack, { name, qps: { main: 5 }, typeGroups: { card_status: 'main' }, cards: 1, intervalsSec: { card_status: 3600 } }),
      ),
    );
    await stack.startWorkers();
    const ref: OrchestrationRef = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref, { reconcileEveryMs: 3_600_000 });
    const ids = accounts.map((a) => a.carrier.id);
    // The status the API serves: with SCHEDULER_LOOP=activity the rounds are the claim loop's
    // published view, not the workflow's query (docs/design.md, 'The claim loop as an activity').
    const rounds = async (id: string): Promise<number> => (await currentSchedulerStatus(ref, stack.deps.store, id).catch(() => undefined))?.rounds ?? 0;
    for (const id of ids) await waitFor(`scheduler ${id}`, async () => (await rounds(id)) >= 1, WAIT_MS);
    await waitFor('the three schedulers listed as running', async () => (await runningSchedulers(ref)).size >= ids.length, WAIT_MS);
    assert.deepEqual([...(await runningSchedulers(ref))].sort(), [...ids].sort(), 'visibility lists this stack’s schedulers, by account id');

    const control = stack.client.workflow.getHandle(pollingControlWorkflowId(ref.workflowIdPrefix));
    // Each account's current scheduler run: a start (child or client) would be a new run.
    const currentRuns = async (): Promise<Record<string, { runId: string; status: string }>> =>
      Object.fromEntries(
        await Promise.all(
          ids.map(async (id) => {
            const described = await stack.client.workflow.getHandle(schedulerWorkflowId(id, ref.workflowIdPrefix)).describe();
            return [id, { runId: described.runId, status: described.status.name }] as const;
          }),
        ),
      );
    const before = await currentRuns();
    await control.executeUpdate(reconcileUpdate);
    assert.deepEqual(await currentRuns(), before, 'every scheduler runs: none started again');

    // One scheduler ends (terminated by an operator): the next reconcile starts that one only.
    const ended = ids[1]!;
    await stack.client.workflow.getHandle(schedulerWorkflowId(ended, ref.workflowIdPrefix)).terminate('test');
    await waitFor('the ended scheduler no longer listed', async () => !(await runningSchedulers(ref)).has(ended), WAIT_MS);
    await control.executeUpdate(reconcileUpdate);
    const after = await currentRuns();
    assert.equal(after[ended]?.status, 'RUNNING', 'the ended scheduler runs again');
    assert.notEqual(after[ended]?.runId, before[ended]?.runId, 'as a new run');
    for (const id of ids.filter((other) => other !== ended)) assert.deepEqual(after[id], before[id], `scheduler ${id} left as it was`);
  } finally {
    await stack.close();
  }
});
