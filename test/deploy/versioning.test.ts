/**
 * Versioned deploys on the real Temporal server: workers of version `a` run the system; version
 * `b` starts beside it and is made current. Every run is pinned to the version it started on:
 * the scheduler and pollingControl runs that were running keep executing on `a` (a change in
 * command order cannot reach them) until their continue-as-new, whose next run starts on `b`;
 * card runs started on `a` finish on `a`. Once `a` has drained and is stopped, the cards keep
 * being checked.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import { DefaultLogger, NativeConnection, Runtime, type Worker } from '@temporalio/worker';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { uniqueName } from '../../testkit/temporal.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { pollingControlWorkflowId, schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { createWorkers, WORKER_KINDS } from '../../src/workers/createWorker.js';
import { WORKFLOWS_PATH } from '../../src/workers/workflowBundle.js';
import { testWorkflowBundle } from '../../testkit/workflowBundle.js';
import { runVersion, setCurrentDeploymentVersion } from '../../testkit/workerVersioning.js';

const { temporal } = proto;
const { EventType } = temporal.api.enums.v1;

/** What a run's history says about the versions that executed it. */
interface RunTrail {
  /** Build id of the worker that completed each workflow task, in order. */
  readonly taskBuildIds: readonly string[];
  /** Workflow tasks completed after one whose started event said the target version had changed. */
  readonly tasksAfterTargetChanged: readonly string[];
  /** The next run's id, when the run continued as new. */
  readonly continuedAs?: { readonly runId: string };
}

async function runTrail(client: Client, workflowId: string, runId: string): Promise<RunTrail> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  const taskBuildIds: string[] = [];
  const tasksAfterTargetChanged: string[] = [];
  let targetChanged = false;
  let continuedAs: RunTrail['continuedAs'];
  for (const event of history.events ?? []) {
    if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED && event.workflowTaskStartedEventAttributes?.targetWorkerDeploymentVersionChanged)
      targetChanged = true;
    if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) {
      const buildId = event.workflowTaskCompletedEventAttributes?.deploymentVersion?.buildId ?? '';
      taskBuildIds.push(buildId);
      if (targetChanged) tasksAfterTargetChanged.push(buildId);
    }
    const next = event.workflowExecutionContinuedAsNewEventAttributes;
    if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW && next) continuedAs = { runId: next.newExecutionRunId ?? '' };
  }
  return { taskBuildIds, tasksAfterTargetChanged, ...(continuedAs ? { continuedAs } : {}) };
}

test('deploy: every run stays on its version; the loops move to the new current version at continue-as-new', async () => {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const stack = await createStack('deploy-versioning');
  const connection = await NativeConnection.connect({ address: stack.config.TEMPORAL_ADDRESS });
  const deploymentName = uniqueName('card-poller');
  const workflowBundle = await testWorkflowBundle({ workflowsPath: WORKFLOWS_PATH });
  const running: { stop(): Promise<void> }[] = [];

  /** The four workers of one deployment version, as separate processes of that version would run them. */
  async function startVersion(buildId: string): Promise<{ stop(): Promise<void> }> {
    const workers: Worker[] = (
      await Promise.all(
        WORKER_KINDS.map((kind) =>
          createWorkers({
            kind,
            config: stack.config,
            connection,
            deps: stack.deps,
            services: stack.services,
            workflowBundle,
            taskQueues: stack.taskQueues,
            deploymentVersion: { deploymentName, buildId },
          }),
        ),
      )
    ).flat();
    const runs = workers.map((worker) => worker.run());
    let stopped: Promise<void> | undefined;
    const handle = {
      stop: () =>
        (stopped ??= (async () => {
          for (const worker of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
          await Promise.allSettled(runs);
        })()),
    };
    running.push(handle);
    return handle;
  }

  /** The version is known to the server once its pollers have been seen: retried until then. */
  const makeCurrent = (buildId: string): Promise<true> =>
    waitFor(
      `version ${buildId} to become current`,
      () =>
        setCurrentDeploymentVersion(stack.client, { deploymentName, buildId }).then(
          () => true as const,
          () => undefined,
        ),
      30_000,
      500,
    );

  const cardRunsSince = async (since: Date, until = new Date(8.64e15)): Promise<{ workflow_id: string; run_id: string }[]> =>
    (
      await stack.db.pool.query<{ workflow_id: string; run_id: string }>(
        'SELECT workflow_id, run_id FROM card_execution WHERE started_at > $1 AND started_at <= $2 ORDER BY started_at',
        [since, until],
      )
    ).rows;

  const runningOnVersion = async (buildId: string): Promise<number> => {
    const query =
      `TemporalWorkerDeploymentVersion = "${deploymentName}:${buildId}" AND ExecutionStatus = "Running" AND ` +
      `WorkflowId STARTS_WITH "${stack.config.WORKFLOW_ID_PREFIX}"`;
    return (await stack.client.workflow.count(query)).count;
  };

  // A run's behaviour is recorded when its workflow task completes, after the execution row is
  // written: read it once the run has closed.
  const isClosed = async (run: { workflow_id: string; run_id: string }): Promise<boolean> =>
    (await stack.client.workflow.getHandle(run.workflow_id, run.run_id).describe()).status.name !== 'RUNNING';

  try {
    const account = await seedAccount(stack, {
      name: 'ver1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 3,
      intervalsSec: { card_status: 2 },
    });
    const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    const schedulerId = schedulerWorkflowId(account.carrier.id, ref.workflowIdPrefix);
    const controlId = pollingControlWorkflowId(ref.workflowIdPrefix);

    const a = await startVersion('a');
    await makeCurrent('a');
    const began = new Date();
    await ensurePollingControl(ref, { reconcileEveryMs: 1000 });
    // As many card runs on a as there are cards (the switch below must find some), one of them closed.
    const onA = await waitFor(
      `${account.cards.length} card runs on version a, one of them closed`,
      async () => {
        const runs = await cardRunsSince(began);
        if (runs.length < account.cards.length) return undefined;
        for (const run of runs) if (await isClosed(run)) return run;
        return undefined;
      },
      60_000,
    );
    assert.deepEqual(await runVersion(stack.client, onA.workflow_id, onA.run_id), { behavior: 'PINNED', buildId: 'a' });
    // The loops' runs on a, pinned: a new current version does not move them at their next task.
    const schedulerRunA = (await stack.client.workflow.getHandle(schedulerId).describe()).runId;
    const controlRunA = (await stack.client.workflow.getHandle(controlId).describe()).runId;
    assert.deepEqual(await runVersion(stack.client, schedulerId, schedulerRunA), { behavior: 'PINNED', buildId: 'a' });
    assert.deepEqual(await runVersion(stack.client, controlId, controlRunA), { behavior: 'PINNED', buildId: 'a' });

    await startVersion('b');
    const beforeSwitch = new Date();
    await makeCurrent('b');
    const switched = new Date();

    // Each loop: the run that was running when b became current saw the change, kept completing
    // its tasks on a, and continued as new onto the current version; the next run executes on b.
    for (const [name, workflowId, runA] of [
      ['carrierScheduler', schedulerId, schedulerRunA],
      ['pollingControl', controlId, controlRunA],
    ] as const) {
      await waitFor(
        `the ${name} run on a to continue as new`,
        async () => (await stack.client.workflow.getHandle(workflowId, runA).describe()).status.name === 'CONTINUED_AS_NEW' || undefined,
        60_000,
        500,
      );
      const trail = await runTrail(stack.client, workflowId, runA);
      assert.deepEqual(new Set(trail.taskBuildIds), new Set(['a']), `every task of the ${name} run on a completed on a`);
      assert.ok(trail.tasksAfterTargetChanged.length >= 1, `the ${name} run on a completed tasks on a after b became current`);
      // (This server, 1.32, leaves the command's initial versioning behavior out of the
      // continued-as-new event; where the next run executes is what shows it took effect.)
      const runB = trail.continuedAs?.runId ?? '';
      assert.ok(runB !== '', `the ${name} run on a continued as new`);
      await waitFor(
        `the next ${name} run's first task`,
        async () => (await runTrail(stack.client, workflowId, runB)).taskBuildIds.length > 0 || undefined,
        30_000,
      );
      assert.deepEqual(await runVersion(stack.client, workflowId, runB), { behavior: 'PINNED', buildId: 'b' }, `the next ${name} run is pinned to b`);
      assert.equal((await runTrail(stack.client, workflowId, runB)).taskBuildIds[0], 'b', `the next ${name} run's first task completed on b`);
    }

    // Card runs started before the switch finish on a, pinned there.
    const startedOnA = await cardRunsSince(began, beforeSwitch);
    assert.ok(startedOnA.length >= account.cards.length, 'card runs were started before the switch');
    for (const run of startedOnA) {
      await waitFor('a card run started before the switch to close', async () => (await isClosed(run)) || undefined, 30_000);
      assert.deepEqual(await runVersion(stack.client, run.workflow_id, run.run_id), { behavior: 'PINNED', buildId: 'a' }, `${run.workflow_id} stays on a`);
    }
    // Card runs the scheduler starts once it is on b run on b.
    const onB = await waitFor(
      'a card run started on version b',
      async () => {
        for (const run of await cardRunsSince(switched)) {
          if (!(await isClosed(run))) continue;
          const version = await runVersion(stack.client, run.workflow_id, run.run_id);
          if (version.buildId === 'b') return version;
        }
        return undefined;
      },
      60_000,
    );
    assert.equal(onB.behavior, 'PINNED');

    assert.ok((await runningOnVersion('b')) >= 2, 'the loops are listed under version b (the drain query below sees versions)');
    // Version a drains (its pinned card runs finish), then its workers go away: everything keeps running on b.
    await waitFor('version a to drain', async () => (await runningOnVersion('a')) === 0 || undefined, 60_000, 500);
    await a.stop();
    const afterStop = new Date();
    await waitFor(
      'every card checked again with only version b running',
      async () => {
        const runs = await cardRunsSince(afterStop);
        return new Set(runs.map((run) => run.workflow_id)).size === account.cards.length || undefined;
      },
      60_000,
    );
  } finally {
    await stack.close();
    for (const handle of running) await handle.stop();
    await connection.close();
  }
});
