/**
 * Replays the recorded histories (scripts/recordHistories.ts), one per path a workflow takes
 * (test/replay/paths.ts), against the current workflow code: a change that would make running
 * pollingControl / carrierScheduler / cardCheck / cardBatch runs fail as non-deterministic after a
 * deploy fails here first. Each history is first checked to be the path it names (its events and
 * decisions), and the same histories replayed against code with a changed command order must
 * fail, so a passing replay is evidence. A deliberate change is deployed behind `patched()` or as
 * a new worker-deployment version (README "Deploying workflow code changes"), then the histories
 * are recorded again.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { DefaultLogger, Runtime, Worker, type WorkflowBundleOption } from '@temporalio/worker';
import { WORKFLOWS_PATH, bundleWorkflows } from '../../src/workers/workflowBundle.js';
import { testWorkflowBundle } from '../../testkit/workflowBundle.js';
import { loadRecordedHistories, type LoadedHistory } from './recorded.js';
import { HistoryView, REPLAY_PATHS } from './paths.js';

const REORDERED_WORKFLOWS = fileURLToPath(new URL('./reorderedWorkflows.ts', import.meta.url));

/** `<error name>: <message>` by file, for each history the bundle fails to replay. */
async function replayFailures(workflowBundle: WorkflowBundleOption, histories: readonly LoadedHistory[]): Promise<Map<string, string>> {
  const failures = new Map<string, string>();
  let replayed = 0;
  const results = Worker.runReplayHistories(
    { workflowBundle },
    // Named by file: two histories may be runs of one workflow id (a card's successive runs).
    histories.map(({ file, history }) => ({ workflowId: file, history })),
  );
  for await (const result of results) {
    replayed += 1;
    if (result.error) failures.set(result.workflowId, `${result.error.name}: ${result.error.message}`);
  }
  assert.equal(replayed, histories.length, 'every history was replayed');
  return failures;
}

// Replay mismatches are the result under test; the SDK's own logging of them is noise here.
Runtime.install({ logger: new DefaultLogger('ERROR') });
const histories = loadRecordedHistories();

test('replay: every path has its recorded history, and each history is the path it names', () => {
  const recorded = new Set(histories.map((h) => h.recorded.path));
  assert.deepEqual(
    Object.keys(REPLAY_PATHS).filter((path) => !recorded.has(path)),
    [],
    'paths without a recorded history',
  );
  for (const { file, recorded: r, history } of histories) {
    const spec = REPLAY_PATHS[r.path];
    assert.ok(spec, `${file}: unknown path ${r.path}`);
    assert.equal(file, `${r.path}.json`, 'one file per path, named after it');
    assert.equal(r.workflowType, spec.workflowType, `${file}: a ${spec.workflowType} history`);
    const view = new HistoryView(history);
    assert.equal(String(history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name), spec.workflowType, `${file}: the run's type`);
    assert.deepEqual(r.events, view.types, `${file}: its event list is the history's`);
    assert.deepEqual(spec.check(view), [], `${file} is not the path ${r.path}`);
  }
});

test('replay: the current workflow code replays every recorded history', async () => {
  const failures = await replayFailures(await testWorkflowBundle({ workflowsPath: WORKFLOWS_PATH }), histories);
  assert.deepEqual(
    [...failures].map(([file, error]) => `${file}: ${error}`),
    [],
    'workflow code no longer replays recorded histories',
  );
});

test('replay: workflow code with a changed command order fails to replay them', async () => {
  const failures = await replayFailures(await bundleWorkflows(REORDERED_WORKFLOWS), histories);
  // Every cardCheck, carrierScheduler and pollingControl history (the workflows changed), each as a determinism violation.
  const changedTypes = ['cardCheck', 'carrierScheduler', 'pollingControl'];
  const changed = histories.filter((h) => changedTypes.includes(h.recorded.workflowType)).map((h) => h.file);
  assert.ok(changed.length >= 2);
  for (const file of changed)
    assert.match(failures.get(file) ?? 'replayed', /^DeterminismViolationError: /, `${file} fails to replay against the changed code`);
  // …and nothing else: the others' code did not change.
  assert.deepEqual(
    [...failures.keys()].filter((file) => !changed.includes(file)),
    [],
  );
});
