/**
 * OpenAPI 3 description built from the routes' own JSON schemas, so the document cannot drift
 * from the validation (served at /docs). Hand-built rather than a plugin: the route schemas are
 * already OpenAPI-compatible JSON schema, collecting them is a few lines.
 */
import type { FastifyInstance, RouteOptions } from 'fastify';
import { errorSchema } from './schemas.js';

interface RouteSchema {
  readonly tags?: readonly string[];
  readonly summary?: string;
  readonly body?: unknown;
  readonly querystring?: { readonly properties?: Record<string, unknown>; readonly required?: readonly string[] };
  readonly params?: { readonly properties?: Record<string, unknown> };
}

type Operation = Record<string, unknown>;

const PUBLIC = new Set(['/healthz', '/metrics']);

/** `/v1/cards/:id` → `/v1/cards/{id}`. */
const openApiPath = (url: string): string => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

function operationOf(url: string, schema: RouteSchema): Operation {
  const parameters = [
    ...Object.entries(schema.params?.properties ?? {}).map(([name, s]) => ({ name, in: 'path', required: true, schema: s })),
    ...Object.entries(schema.querystring?.properties ?? {}).map(([name, s]) => ({ name, in: 'query', required: schema.querystring?.required?.includes(name) ?? false, schema: s })),
  ];
  const json = (s: unknown): Record<string, unknown> => ({ 'application/json': { schema: s } });
  return {
    ...(schema.tags ? { tags: schema.tags } : {}),
    ...(schema.summary ? { summary: schema.summary } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(schema.body
      ? { requestBody: { required: true, content: url === '/v1/cards/import' ? { ...json(schema.body), 'application/x-ndjson': { schema: { type: 'string', description: 'one card object per line' } } } : json(schema.body) } }
      : {}),
    responses: {
      '2XX': { description: 'success' },
      ...(PUBLIC.has(url) ? {} : { '401': { description: 'missing or wrong bearer token', content: json(errorSchema) } }),
      '4XX': { description: '{ error: { code, message, field? } }: 400 invalid, 404 not found, 409 conflict', content: json(errorSchema) },
    },
    ...(PUBLIC.has(url) ? { security: [] } : {}),
  };
}

/** Collects routes as they are added; call before registering them. */
export function collectOpenApi(app: FastifyInstance): () => Record<string, unknown> {
  const paths: Record<string, Record<string, Operation>> = {};
  app.addHook('onRoute', (route: RouteOptions) => {
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).filter((m) => m !== 'HEAD');
    if (route.url === '/docs') return;
    const path = openApiPath(route.url);
    for (const method of methods) {
      paths[path] = { ...paths[path], [method.toLowerCase()]: operationOf(route.url, (route.schema ?? {}) as RouteSchema) };
    }
  });
  return () => ({
    openapi: '3.0.3',
    info: { title: 'card-poller operations API', version: '1', description: 'DESIGN §10. Bearer token on everything but /healthz and /metrics.' },
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    security: [{ bearer: [] }],
    paths,
  });
}

declare module 'fastify' {
  /** Documentation fields of a route schema, copied into the OpenAPI operation. */
  interface FastifySchema {
    tags?: readonly string[];
    summary?: string;
  }
}
