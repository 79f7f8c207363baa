/**
 * Unauthenticated infrastructure endpoints: `/healthz` (liveness of every dependency, 503 naming
 * the failed ones) and `/metrics` (the process' Prometheus registry).
 */
import type { ApiApp } from '../app.js';
import type { ApiContext } from '../context.js';

/** A dependency that does not answer within this is reported down (probes must stay fast). */
export const HEALTH_TIMEOUT_MS = 2000;

export interface HealthCheck {
  readonly ok: boolean;
  readonly ms: number;
  readonly error?: string;
}

async function probe(fn: () => Promise<unknown>): Promise<HealthCheck> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${HEALTH_TIMEOUT_MS} ms`)), HEALTH_TIMEOUT_MS);
    });
    await Promise.race([fn(), timeout]);
    return { ok: true, ms: Date.now() - started };
  } catch (error) {
    return { ok: false, ms: Date.now() - started, error: error instanceof Error ? error.message : String(error) };
  } finally {
    clearTimeout(timer);
  }
}

const check = {
  type: 'object',
  required: ['ok', 'ms'],
  additionalProperties: false,
  properties: { ok: { type: 'boolean' }, ms: { type: 'number' }, error: { type: 'string' } },
} as const;

const healthSchema = {
  type: 'object',
  required: ['status', 'checks'],
  additionalProperties: false,
  properties: {
    status: { type: 'string', enum: ['ok', 'unavailable'] },
    failed: { type: 'array', items: { type: 'string' }, description: 'the dependencies that did not answer' },
    checks: {
      type: 'object',
      required: ['postgres', 'redis', 'temporal'],
      additionalProperties: false,
      properties: { postgres: check, redis: check, temporal: check },
    },
  },
} as const;

/** Open to infrastructure that holds no token. */
const open = [] as const;

export function registerHealthRoutes(app: ApiApp, ctx: ApiContext): void {
  app.get(
    '/healthz',
    {
      schema: {
        tags: ['operations'],
        summary: 'Liveness of PostgreSQL, Redis and Temporal (200 or 503)',
        security: open,
        response: { 200: healthSchema, 503: healthSchema },
      },
    },
    async (_request, reply) => {
      const [postgres, redis, temporal] = await Promise.all([
        probe(() => ctx.deps.pool.query('SELECT 1')),
        probe(() => ctx.deps.redis.ping()),
        probe(() => ctx.orchestration.client.workflowService.getSystemInfo({})),
      ]);
      const checks = { postgres, redis, temporal };
      const failed = Object.entries(checks)
        .filter(([, check]) => !check.ok)
        .map(([name]) => name);
      return reply.status(failed.length === 0 ? 200 : 503).send(failed.length === 0 ? { status: 'ok', checks } : { status: 'unavailable', failed, checks });
    },
  );

  app.get(
    '/metrics',
    {
      schema: {
        tags: ['operations'],
        summary: 'Prometheus metrics',
        security: open,
        produces: ['text/plain'],
        response: { 200: { type: 'string', description: 'Prometheus text exposition format' } },
      },
    },
    async (_request, reply) => {
      const body = await ctx.deps.registry.metrics();
      return reply.type(ctx.deps.registry.contentType).send(body);
    },
  );
}
