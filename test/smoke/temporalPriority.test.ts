/**
 * The dev server the project starts honours Temporal priority keys (docs/design.md §2, the
 * `polling-card-priority` queue row): a request-check's run carries priority key 1 so that it and its
 * activities go ahead of the normal lane's backlog on the queues both lanes share. The server ignores
 * priority keys unless its priority matcher is on (`matching.useNewMatcher`, off by default), and on
 * a queue split into partitions the order holds only within each partition, so devstack/temporal.ts
 * turns the matcher on and gives each queue one partition.
 *
 * What the server decided is asserted, not a time: a backlog of runs with the default priority, one
 * run with priority key 1 started after all of them, then a worker that takes one activity at a time.
 * First in, first out, the late run's activity would be one of the last; with priorities it is one
 * of the first.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { Worker } from '@temporalio/worker';
import { connectTestEnv, bundleOnce, uniqueName } from '../../testkit/temporal.js';
import { smokeWorkflow } from '../fixtures/smokeWorkflows.js';

const BACKLOG = 60;
const URGENT = 'urgent';
/** Places the urgent run's activity may take: the worker's first workflow tasks may already be under way when it is read. */
const FIRST_PLACES = 2;

test('temporal: a run with priority key 1 started behind a backlog has its activity run among the first', async (t) => {
  const env = await connectTestEnv();
  try {
    const taskQueue = uniqueName('priority');
    const prefix = uniqueName('priority-wf');
    // No worker yet: every start lands in the queue's backlog, in this order.
    for (let i = 0; i < BACKLOG; i++) await env.client.workflow.start(smokeWorkflow, { taskQueue, workflowId: `${prefix}-${i}`, args: [`n${i}`] });
    const urgent = await env.client.workflow.start(smokeWorkflow, {
      taskQueue,
      workflowId: `${prefix}-urgent`,
      args: [URGENT],
      priority: { priorityKey: 1 },
    });
    const order: string[] = [];
    const worker = await Worker.create({
      connection: env.nativeConnection,
      namespace: env.namespace ?? 'default',
      taskQueue,
      workflowBundle: await bundleOnce(fileURLToPath(new URL('../fixtures/smokeWorkflows.ts', import.meta.url))),
      activities: {
        shout: async (word: string): Promise<string> => {
          order.push(word);
          return word;
        },
      },
      maxConcurrentActivityTaskExecutions: 1,
      maxConcurrentWorkflowTaskExecutions: 2,
    });
    await worker.runUntil(async () => {
      await urgent.result();
      for (let i = 0; i < BACKLOG; i++) await env.client.workflow.getHandle(`${prefix}-${i}`).result();
    });
    const place = order.indexOf(URGENT) + 1;
    t.diagnostic(`activities in the order run: ${order.join(' ')}; the urgent one ${place} of ${order.length}`);
    assert.equal(order.length, BACKLOG + 1, 'every run ran its activity once');
    assert.ok(place >= 1 && place <= FIRST_PLACES, `the priority-1 run's activity ran ${place} of ${order.length} (at most ${FIRST_PLACES} expected)`);
  } finally {
    await env.teardown();
  }
});
