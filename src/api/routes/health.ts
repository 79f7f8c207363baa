/**
 * Unauthenticated infrastructure endpoints: the health contract of src/runtime/health.ts —
 * `/livez` (the process answers), `/readyz` (PostgreSQL, Redis and Temporal answer; 503 naming the
 * failed ones) and `/healthz`, an alias of `/readyz` — and `/metrics` (the process' Prometheus
 * registry).
 */
import type { ApiApp } from '../app.js';
import type { ApiContext } from '../context.js';
import { dependencyProbes, healthStatusCode, probeDependencies } from '../../runtime/health.js';

const check = {
  type: 'object',
  required: ['ok', 'ms'],
  additionalProperties: false,
  properties: { ok: { type: 'boolean' }, ms: { type: 'number' }, error: { type: 'string' } },
} as const;

const status = { type: 'string', enum: ['ok', 'unavailable'] } as const;

const liveSchema = {
  type: 'object',
  required: ['status'],
  additionalProperties: false,
  properties: { status },
} as const;

const readySchema = {
  type: 'object',
  required: ['status', 'checks'],
  additionalProperties: false,
  properties: {
    status,
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
    '/livez',
    {
      schema: {
        tags: ['operations'],
        summary: 'Liveness: 200 while the process answers (a dependency outage does not fail it)',
        security: open,
        response: { 200: liveSchema },
      },
    },
    // Answering at all is the whole check: nothing a restart would mend shows up here otherwise.
    async () => ({ status: 'ok' as const }),
  );

  const ready = () => probeDependencies(dependencyProbes(ctx.deps, ctx.orchestration.client));
  for (const [path, summary, deprecated] of [
    ['/readyz', 'Readiness: PostgreSQL, Redis and Temporal answer (200), or 503 naming the failed ones', false],
    ['/healthz', 'Alias of /readyz (kept for probes written before /livez and /readyz)', true],
  ] as const) {
    app.get(
      path,
      { schema: { tags: ['operations'], summary, deprecated, security: open, response: { 200: readySchema, 503: readySchema } } },
      async (_request, reply) => {
        const report = await ready();
        return reply.status(healthStatusCode(report)).send(report);
      },
    );
  }

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
