/**
 * The mode switch heartbeats, and its activity has a heartbeat timeout (src/workflows/pollingControl.ts):
 * a worker that stops heartbeating mid-switch (it died, or hangs) is noticed by the server when the
 * heartbeat timeout ends, and the switch is retried — instead of when its 30-minute start-to-close
 * timeout ends. Here the first attempt heartbeats once and then never again nor completes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Context } from '@temporalio/activity';
import proto from '@temporalio/proto';
import { controlStatus, createStack } from '../../testkit/orchestration.js';
import { startStackWorkers } from '../../testkit/isolatedStack.js';
import { waitFor } from '../../testkit/seed.js';
import { ensurePollingControl, setMode } from '../../src/app/temporalControl.js';
import { pollingControlWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import type { ModeSwitcher } from '../../src/app/ports.js';

const HEARTBEAT_TIMEOUT_MS = 2000;
/** Far beyond the heartbeat timeout plus the retry's backoff; far below the 30-minute start-to-close timeout. */
const RETRY_BOUND_MS = 120_000;

test('a mode switch whose worker stops heartbeating is timed out by its heartbeat timeout and retried', async () => {
  const stack = await createStack('orch-switch-heartbeat');
  const attempts: { attempt: number; heartbeatTimeoutMs: number | undefined }[] = [];
  let releaseFirst: () => void = () => undefined;
  const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
  const modes: ModeSwitcher = {
    async switchMode(_mode, _actor, heartbeat) {
      const { attempt, heartbeatTimeoutMs } = Context.current().info;
      attempts.push({ attempt, heartbeatTimeoutMs });
      heartbeat();
      // The first attempt's worker "dies" here: no heartbeat, no completion, until the test ends.
      if (attempt === 1) await firstHeld;
      return { changed: true };
    },
  };
  const started = await startStackWorkers({ config: stack.config, deps: stack.deps, services: { ...stack.services, modes }, taskQueues: stack.taskQueues }, [
    'control',
  ]);
  try {
    const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref, { switchHeartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS });
    // Its handlers exist once it has read the mode: the query answers from then on.
    await waitFor('pollingControl to answer its status query', () => controlStatus(ref).catch(() => undefined), 60_000);
    const outcome = await Promise.race([
      setMode(ref, 'legacy').catch((error: unknown) => {
        throw new Error(`setMode failed: ${String(error)} ← ${String((error as { cause?: unknown }).cause)} (attempts seen: ${JSON.stringify(attempts)})`);
      }),
      new Promise<'not retried'>((resolve) => setTimeout(() => resolve('not retried'), RETRY_BOUND_MS).unref()),
    ]);
    assert.notEqual(outcome, 'not retried', `the switch was not retried (attempts seen: ${JSON.stringify(attempts)})`);
    assert.deepEqual(outcome, { mode: 'legacy', changed: true });
    assert.deepEqual(
      attempts.map((entry) => entry.attempt),
      [1, 2],
    );
    assert.ok(attempts.every((entry) => entry.heartbeatTimeoutMs === HEARTBEAT_TIMEOUT_MS));

    // What the server recorded: the attempt that completed is the second, after a heartbeat timeout.
    const history = await stack.client.workflow.getHandle(pollingControlWorkflowId(stack.config.WORKFLOW_ID_PREFIX)).fetchHistory();
    const events = history.events ?? [];
    const scheduled = events.find((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'switchMode');
    assert.ok(scheduled, 'switchMode was scheduled');
    assert.equal(Number(scheduled.activityTaskScheduledEventAttributes?.heartbeatTimeout?.seconds ?? 0), HEARTBEAT_TIMEOUT_MS / 1000);
    const startedEvent = events.find((event) => event.activityTaskStartedEventAttributes?.scheduledEventId?.toString() === scheduled.eventId?.toString());
    const attributes = startedEvent?.activityTaskStartedEventAttributes;
    assert.equal(attributes?.attempt, 2);
    assert.equal(attributes?.lastFailure?.timeoutFailureInfo?.timeoutType, proto.temporal.api.enums.v1.TimeoutType.TIMEOUT_TYPE_HEARTBEAT);
  } finally {
    releaseFirst();
    for (const worker of started.workers) if (worker.getState() === 'RUNNING') worker.shutdown();
    await Promise.allSettled(started.runs);
    await started.connection.close();
    await stack.close();
  }
});
