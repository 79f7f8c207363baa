/** An API server on a fresh test stack, driven in-process with `inject`. */
import type { FastifyInstance, InjectOptions } from 'fastify';
import { buildApiServer } from '../../src/api/server.js';
import type { OrchestrationRef } from '../../src/app/temporalControl.js';
import type { Config } from '../../src/config/index.js';
import { createStack, type Stack } from '../../testkit/orchestration.js';

export interface ApiStack {
  readonly stack: Stack;
  readonly app: FastifyInstance;
  readonly ref: OrchestrationRef;
  /** Authenticated call; `token: null` sends none. */
  call<T = Record<string, unknown>>(
    method: InjectOptions['method'],
    url: string,
    body?: unknown,
    options?: { token?: string | null; headers?: Record<string, string> },
  ): Promise<{ status: number; body: T; headers: Record<string, unknown> }>;
  close(): Promise<void>;
}

export async function createApiStack(label: string, config: Partial<Config> = {}): Promise<ApiStack> {
  const stack = await createStack(label, { config });
  const ref: OrchestrationRef = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
  const app = await buildApiServer(
    { config: stack.config, deps: stack.deps, services: stack.services, orchestration: ref },
    { logLevel: process.env.API_TEST_LOG_LEVEL ?? 'silent' },
  );
  return {
    stack,
    app,
    ref,
    async call<T>(method: InjectOptions['method'], url: string, body?: unknown, options: { token?: string | null; headers?: Record<string, string> } = {}) {
      const token = options.token === undefined ? stack.config.API_TOKEN : options.token;
      const headers: Record<string, string> = { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...options.headers };
      const response = await app.inject({
        method,
        url,
        headers,
        ...(body === undefined ? {} : typeof body === 'string' ? { payload: body } : { payload: body as Record<string, unknown> }),
      });
      const text = response.body;
      const parsed = text === '' ? {} : response.headers['content-type']?.toString().includes('json') ? (JSON.parse(text) as T) : (text as unknown as T);
      return { status: response.statusCode, body: parsed as T, headers: response.headers };
    },
    async close() {
      await app.close();
      await stack.close();
    },
  };
}

/** A carrier body the API accepts; override what a test is about. */
export function carrierBody(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    gatewayAccount: `${name}-gw`,
    inflightLimit: 50,
    leaseMs: 20_000,
    stepTimeoutMs: 3_000,
    totalTimeoutMs: 10_000,
    groups: [{ name: 'main', qps: 20 }],
    typeGroups: { card_status: 'main', carddata: 'main' },
    ...extra,
  };
}

/** A valid 20-digit ICCID from a number. */
export const iccid = (n: number, prefix = '8986'): string => `${prefix}${String(n).padStart(16, '0')}`;

export interface ErrorAnswer {
  readonly error: { readonly code: string; readonly message: string; readonly field?: string };
}
