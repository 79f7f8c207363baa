import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { Worker } from '@temporalio/worker';
import { connectTestEnv, bundleOnce, uniqueName } from '../../testkit/temporal.js';
import * as activities from '../fixtures/smokeActivities.js';
import { smokeWorkflow } from '../fixtures/smokeWorkflows.js';

test('temporal: a workflow runs an activity on the dev server and its history reads back', async () => {
  const env = await connectTestEnv();
  try {
    const taskQueue = uniqueName('smoke');
    const worker = await Worker.create({
      connection: env.nativeConnection,
      namespace: env.namespace ?? 'default',
      taskQueue,
      workflowBundle: await bundleOnce(fileURLToPath(new URL('../fixtures/smokeWorkflows.ts', import.meta.url))),
      activities,
    });
    const workflowId = uniqueName('smoke-wf');
    const result = await worker.runUntil(env.client.workflow.execute(smokeWorkflow, { taskQueue, workflowId, args: ['ping'] }));
    assert.equal(result, 'PING!');
    const history = await env.client.workflow.getHandle(workflowId).fetchHistory();
    const types = (history.events ?? []).map((event) => event.eventType);
    // Proves a real server recorded it: the activity was scheduled and completed in durable history.
    assert.ok(types.length >= 8, `expected a full history, got ${types.length} events`);
    const scheduled = (history.events ?? []).find((event) => event.activityTaskScheduledEventAttributes);
    assert.equal(scheduled?.activityTaskScheduledEventAttributes?.activityType?.name, 'shout');
    const described = await env.client.workflow.getHandle(workflowId).describe();
    assert.equal(described.status.name, 'COMPLETED');
  } finally {
    await env.teardown();
  }
});
