/**
 * Replays recorded histories of every workflow (scripts/recordHistories.ts) against the current
 * workflow code: a change that would make running pollingControl / carrierScheduler / cardCheck /
 * cardBatch runs fail as non-deterministic after a deploy fails here first. A deliberate change is
 * deployed behind `patched()` or as a new worker-deployment version (README "Deploying workflow
 * code changes"), then the histories are recorded again.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { bundleWorkflows } from '../../src/workers/workflowBundle.js';
import { loadRecordedHistories } from './recorded.js';

const WORKFLOW_TYPES = ['pollingControl', 'carrierScheduler', 'cardCheck', 'cardBatch'];
/** Events that record a command of the workflow code (what replay compares against the code). */
const COMMAND_EVENTS = new Set([
  'MARKER_RECORDED',
  'ACTIVITY_TASK_SCHEDULED',
  'TIMER_STARTED',
  'START_CHILD_WORKFLOW_EXECUTION_INITIATED',
  'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
  'WORKFLOW_EXECUTION_CONTINUED_AS_NEW',
  'WORKFLOW_EXECUTION_COMPLETED',
]);

test('replay: the current workflow code replays the recorded history of every workflow', async () => {
  // Replay mismatches are the result under test; the SDK's own logging of them is noise here.
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const histories = loadRecordedHistories();
  for (const type of WORKFLOW_TYPES)
    assert.ok(
      histories.some((h) => h.recorded.workflowType === type),
      `a recorded ${type} history exists`,
    );
  for (const { file, recorded, history } of histories) {
    assert.equal(history.events?.length, recorded.events.length, `${file} decodes to the events it lists`);
    // Histories that only start the run prove nothing: each must hold commands the code issued.
    assert.ok(recorded.events.filter((e) => COMMAND_EVENTS.has(e)).length >= 2, `${file} holds commands of the workflow code`);
  }

  const workflowBundle = await bundleWorkflows();
  const failures: string[] = [];
  const replayed: string[] = [];
  const results = Worker.runReplayHistories(
    { workflowBundle },
    histories.map(({ recorded, history }) => ({ workflowId: recorded.workflowId, history })),
  );
  for await (const result of results) {
    replayed.push(result.workflowId);
    if (result.error) failures.push(`${result.workflowId}: ${result.error.name}: ${result.error.message}`);
  }
  assert.equal(replayed.length, histories.length, 'every history was replayed');
  assert.deepEqual(failures, [], `workflow code no longer replays recorded histories:\n${failures.join('\n')}`);
});
