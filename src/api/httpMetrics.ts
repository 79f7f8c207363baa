/** Request count and latency per route and status, on the process' registry next to the activity metrics. */
import type { FastifyInstance } from 'fastify';
import { Histogram, type Registry } from 'prom-client';

const NAME = 'cardpoller_http_request_duration_seconds';

function histogram(registry: Registry): Histogram<'method' | 'route' | 'status'> {
  // Several servers may share one registry (tests); a metric can be registered only once.
  const existing = registry.getSingleMetric(NAME);
  if (existing) return existing as Histogram<'method' | 'route' | 'status'>;
  return new Histogram({
    name: NAME,
    help: 'HTTP API requests by method, route pattern and status code',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry],
  });
}

export function registerHttpMetrics(app: FastifyInstance, registry: Registry): void {
  const requests = histogram(registry);
  app.addHook('onResponse', async (request, reply) => {
    // The route pattern, not the URL, so ids do not explode the label set.
    const route = request.routeOptions.url ?? 'unmatched';
    requests.observe({ method: request.method, route, status: String(reply.statusCode) }, reply.elapsedTime / 1000);
  });
}
