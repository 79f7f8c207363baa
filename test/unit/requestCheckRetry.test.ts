/**
 * requestCheck's retry of an update the server did not take: the same update id every time, and
 * a window that outlasts a loop workflow task held by a killed worker (CI, 2026-12-02: a
 * request-check failed with "Workflow Task in failed state" after the control worker holding the
 * scheduler's task was killed -9; the window was 30 s, the task's timeout 30 s).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ServiceError, type Client } from '@temporalio/client';
import { UPDATE_RETRY_WINDOW_MS, requestCheck, type OrchestrationRef } from '../../src/app/temporalControl.js';
import { LOOP_WORKFLOW_TASK_TIMEOUT_MS } from '../../src/workflow-safe/loopTaskTimeout.js';
import type { RequestCheckResult } from '../../src/workflow-safe/requestCheck.js';

/** The gRPC error the server answers an update with while the run's workflow task is in failed state. */
const taskInFailedState = (): ServiceError =>
  new ServiceError('Workflow Update failed', {
    cause: Object.assign(new Error('9 FAILED_PRECONDITION'), {
      code: 9,
      details: 'Unable to perform workflow execution update due to Workflow Task in failed state.',
      metadata: {},
    }),
  });

test('request-check: an update refused while the scheduler’s task is in failed state is sent again under the same update id', async () => {
  const updateIds: string[] = [];
  const served: RequestCheckResult = { status: 'requested', requested: 1 };
  const handle = {
    executeUpdate: async (_update: unknown, options: { updateId: string }): Promise<RequestCheckResult> => {
      updateIds.push(options.updateId);
      if (updateIds.length < 3) throw taskInFailedState();
      return served;
    },
  };
  const ref = { client: { workflow: { getHandle: () => handle } } as unknown as Client, taskQueues: {}, workflowIdPrefix: 't-' } as unknown as OrchestrationRef;
  const result = await requestCheck(ref, '1', { cardId: '42', types: ['card_status'], actor: 'test', source: 'test' });
  assert.equal(result, served);
  assert.equal(updateIds.length, 3);
  assert.equal(new Set(updateIds).size, 1, 'one update id for every attempt');
});

test('request-check: the retry window outlasts a loop workflow task held by a killed worker, and the retry of that task', () => {
  assert.ok(
    UPDATE_RETRY_WINDOW_MS >= 2 * LOOP_WORKFLOW_TASK_TIMEOUT_MS,
    `${UPDATE_RETRY_WINDOW_MS} ms against a ${LOOP_WORKFLOW_TASK_TIMEOUT_MS} ms task timeout`,
  );
});
