/**
 * Unauthenticated infrastructure endpoints: `/healthz` (liveness of every dependency, 503 naming
 * the failed ones) and `/metrics` (the process' Prometheus registry).
 */
import type { FastifyInstance } from 'fastify';
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

export function registerHealthRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get('/healthz', { schema: { tags: ['operations'], summary: 'Liveness of PostgreSQL, Redis and Temporal (200 or 503)' } }, async (_request, reply) => {
    const [postgres, redis, temporal] = await Promise.all([
      probe(() => ctx.deps.pool.query('SELECT 1')),
      probe(() => ctx.deps.redis.ping()),
      probe(() => ctx.orchestration.client.workflowService.getSystemInfo({})),
    ]);
    const checks = { postgres, redis, temporal };
    const failed = Object.entries(checks).filter(([, check]) => !check.ok).map(([name]) => name);
    return reply.status(failed.length === 0 ? 200 : 503).send(failed.length === 0 ? { status: 'ok', checks } : { status: 'unavailable', failed, checks });
  });

  app.get('/metrics', { schema: { tags: ['operations'], summary: 'Prometheus metrics' } }, async (_request, reply) => {
    const body = await ctx.deps.registry.metrics();
    return reply.type(ctx.deps.registry.contentType).send(body);
  });
}
