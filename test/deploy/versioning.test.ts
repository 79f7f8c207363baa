/**
 * Versioned deploys on the real Temporal server: workers of version `a` run the system; version
 * `b` starts beside it and is made current; new card runs start on `b` pinned to it, the
 * scheduler and pollingControl loops move to `b` at their next workflow task (auto-upgrade), and
 * once `a` is stopped the cards keep being checked.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DefaultLogger, NativeConnection, Runtime, type Worker } from '@temporalio/worker';
import { createStack } from '../helpers/orchestration.js';
import { seedAccount, waitFor } from '../helpers/seed.js';
import { uniqueName } from '../helpers/temporal.js';
import { ensurePollingControl } from '../../src/polling/temporalControl.js';
import { pollingControlWorkflowId, schedulerWorkflowId } from '../../src/common/orchestration.js';
import { createWorkers, WORKER_KINDS } from '../../src/workers/createWorker.js';
import { bundleWorkflows } from '../../src/workers/workflowBundle.js';
import { runVersion, setCurrentDeploymentVersion } from '../../src/workers/deployment.js';

test('deploy: card runs stay pinned to their version, the loops move to the new current version', async () => {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const stack = await createStack('deploy-versioning');
  const connection = await NativeConnection.connect({ address: stack.config.TEMPORAL_ADDRESS });
  const deploymentName = uniqueName('card-poller');
  const workflowBundle = await bundleWorkflows();
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

  const cardRunsSince = async (since: Date): Promise<{ workflow_id: string; run_id: string }[]> =>
    (
      await stack.db.pool.query<{ workflow_id: string; run_id: string }>(
        'SELECT workflow_id, run_id FROM card_execution WHERE started_at > $1 ORDER BY started_at',
        [since],
      )
    ).rows;

  const runningOnVersion = async (buildId: string): Promise<number> => {
    const query =
      `TemporalWorkerDeploymentVersion = "${deploymentName}:${buildId}" AND ExecutionStatus = "Running" AND ` +
      `WorkflowId STARTS_WITH "${stack.config.WORKFLOW_ID_PREFIX}"`;
    return (await stack.client.workflow.count(query)).count;
  };

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
    // A run's behaviour is recorded when its workflow task completes, after the execution row is
    // written: read it once the run has closed.
    const isClosed = async (run: { workflow_id: string; run_id: string }): Promise<boolean> =>
      (await stack.client.workflow.getHandle(run.workflow_id, run.run_id).describe()).status.name !== 'RUNNING';
    const onA = await waitFor(
      'a closed card run on version a',
      async () => {
        for (const run of await cardRunsSince(began)) if (await isClosed(run)) return run;
        return undefined;
      },
      60_000,
    );
    assert.deepEqual(await runVersion(stack.client, onA.workflow_id, onA.run_id), { behavior: 'PINNED', buildId: 'a' });
    assert.deepEqual(await runVersion(stack.client, schedulerId), { behavior: 'AUTO_UPGRADE', buildId: 'a' });

    await startVersion('b');
    await makeCurrent('b');
    const switched = new Date();
    const onB = await waitFor(
      'a card run started on version b',
      async () => {
        for (const run of await cardRunsSince(switched)) {
          if (!(await isClosed(run))) continue;
          const version = await runVersion(stack.client, run.workflow_id, run.run_id);
          if (version.buildId === 'b') return { run, version };
        }
        return undefined;
      },
      60_000,
    );
    assert.equal(onB.version.behavior, 'PINNED');
    await waitFor('the scheduler to move to version b', async () => (await runVersion(stack.client, schedulerId)).buildId === 'b' || undefined, 30_000);
    await waitFor('pollingControl to move to version b', async () => (await runVersion(stack.client, controlId)).buildId === 'b' || undefined, 30_000);
    assert.equal((await runVersion(stack.client, schedulerId)).behavior, 'AUTO_UPGRADE');

    assert.ok((await runningOnVersion('b')) >= 2, 'the loops are listed under version b (the drain query below sees versions)');
    // Version a drains (its pinned card runs finish), then its workers go away: everything keeps running on b.
    await waitFor('version a to drain', async () => (await runningOnVersion('a')) === 0 || undefined, 30_000, 500);
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
