/**
 * Every "try again later" the API can meet answers 503 with `Retry-After`, never 500: the errors
 * are the ones the Temporal client and node-postgres really raise, thrown from a route behind the
 * API's own error handler.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import Fastify, { type FastifyInstance } from 'fastify';
import {
  ActivityFailure,
  ApplicationFailure,
  ServiceError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
} from '@temporalio/client';
import { SCHEDULER_CONTINUING_AS_NEW } from '../../src/workflow-safe/requestCheck.js';
import { RetryState } from '@temporalio/common';
import { REQUEST_CHECK_REJECTED } from '../../src/workflow-safe/requestCheckValidation.js';
import { handleError } from '../../src/api/errors.js';
import { requireRunning } from '../../src/api/workflowCalls.js';

/** gRPC status codes (grpc/status.h). */
const grpcStatus = { DEADLINE_EXCEEDED: 4, RESOURCE_EXHAUSTED: 8, FAILED_PRECONDITION: 9, UNAVAILABLE: 14 } as const;

/** The shape @grpc/grpc-js hands the client when a call fails with `code` (a details string, a metadata record). */
function grpcError(code: number, details: string): Error {
  return Object.assign(new Error(`${code}: ${details}`), { code, details, metadata: {} });
}

const THROWN: Record<string, () => Error> = {
  // The scheduler refuses updates while it continues as new; the client gave up retrying after its 30 s.
  continuingAsNew: () =>
    new WorkflowUpdateFailedError(
      'Workflow Update failed',
      ApplicationFailure.nonRetryable('carrierScheduler is continuing as new; retry', SCHEDULER_CONTINUING_AS_NEW),
    ),
  updateRpcTimedOut: () =>
    new WorkflowUpdateRPCTimeoutOrCancelledError('Timed out waiting for update response', { cause: grpcError(grpcStatus.DEADLINE_EXCEEDED, 'deadline') }),
  temporalUnavailable: () => new ServiceError('Failed to query workflow', { cause: grpcError(grpcStatus.UNAVAILABLE, 'No connection established') }),
  temporalBusy: () => new ServiceError('Failed to signal workflow', { cause: grpcError(grpcStatus.RESOURCE_EXHAUSTED, 'namespace rate limit exceeded') }),
  updateAborted: () => new ServiceError('Failed to execute update', { cause: grpcError(grpcStatus.FAILED_PRECONDITION, 'update aborted by continue-as-new') }),
  databaseDown: () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5433'), { code: 'ECONNREFUSED' }),
  redisGaveUp: () =>
    Object.assign(new Error('Reached the max retries per request limit (which is 3). Refer to "maxRetriesPerRequest" option for details.'), {
      name: 'MaxRetriesPerRequestError',
    }),
  redisClosed: () => new Error('Connection is closed.'),
  databaseRestarting: () => Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
};

let app: FastifyInstance;
before(async () => {
  app = Fastify({ logger: false });
  app.setErrorHandler(handleError);
  app.get<{ Params: { kind: string } }>('/throw/:kind', async (request) => {
    const make = THROWN[request.params.kind];
    if (!make) throw new Error('no such kind');
    // As the routes call the orchestration: through requireRunning.
    return requireRunning('the scheduler of carrier account 1', async () => {
      throw make();
    });
  });
  app.get('/missing', async () =>
    requireRunning('pollingControl', async () => {
      throw new WorkflowNotFoundError('workflow not found', 'polling-control', undefined);
    }),
  );
  // The scheduler's requestCheck update failed because its activity rejected the request for good
  // (non-retryable, with the rejection's code and field as details): not a server fault.
  app.get<{ Params: { code: string } }>('/rejected/:code', async (request) =>
    requireRunning('the scheduler of carrier account 1', async () => {
      const rejection = ApplicationFailure.create({
        message: 'cooldownMs must be at most 86400000, got 86400001',
        type: REQUEST_CHECK_REJECTED,
        nonRetryable: true,
        details: [{ code: request.params.code, field: 'cooldownMs' }],
      });
      throw new WorkflowUpdateFailedError(
        'Workflow Update failed',
        new ActivityFailure('Activity task failed', 'requestCheck', '7', RetryState.NON_RETRYABLE_FAILURE, 'worker', rejection),
      );
    }),
  );
  app.get('/bug', async () => {
    throw new TypeError('undefined is not a function');
  });
  await app.ready();
});
after(() => app.close());

test('every "try again" error answers 503 unavailable with a Retry-After in seconds', async () => {
  for (const kind of [...Object.keys(THROWN), 'missing']) {
    const response = await app.inject({ method: 'GET', url: kind === 'missing' ? '/missing' : `/throw/${kind}` });
    assert.equal(response.statusCode, 503, `${kind}: ${response.body}`);
    assert.equal(response.json<{ error: { code: string } }>().error.code, 'unavailable', kind);
    const retryAfter = Number(response.headers['retry-after']);
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `${kind}: Retry-After ${String(response.headers['retry-after'])}`);
  }
});

test('a real bug is still a 500 without a Retry-After', async () => {
  const response = await app.inject({ method: 'GET', url: '/bug' });
  assert.equal(response.statusCode, 500);
  assert.equal(response.headers['retry-after'], undefined);
});

test('a request-check the scheduler rejected for good answers 4xx naming the field, not 500', async () => {
  for (const [code, status] of [
    ['invalid', 400],
    ['not_found', 404],
  ] as const) {
    const response = await app.inject({ method: 'GET', url: `/rejected/${code}` });
    assert.equal(response.statusCode, status, `${code}: ${response.body}`);
    const { error } = response.json<{ error: { code: string; field?: string; message: string } }>();
    assert.deepEqual([error.code, error.field], [code, 'cooldownMs']);
    assert.match(error.message, /cooldownMs must be at most/);
  }
});
