import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createApiStack, type ApiStack } from './helpers.js';

interface Operation {
  readonly parameters?: { name: string; in: string; schema?: unknown }[];
  readonly requestBody?: { content: Record<string, { schema?: unknown }> };
  readonly responses: Record<string, { description?: string; content?: Record<string, { schema?: unknown }> }>;
  readonly security?: unknown[];
}

interface Document {
  readonly openapi: string;
  readonly paths: Record<string, Record<string, Operation>>;
}

let api: ApiStack;
let document: Document;
before(async () => {
  api = await createApiStack('api-docs');
  const answer = await api.call<Document>('GET', '/docs/json');
  assert.equal(answer.status, 200);
  document = answer.body;
});
after(async () => {
  await api.close();
});

/** `/v1/cards/:id` → `/v1/cards/{id}`. */
const openApiPath = (url: string): string => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

test('/docs/json describes every registered route with its request and answer schemas', () => {
  assert.match(document.openapi, /^3\./);
  const routes = api.app.documentedRoutes();
  assert.ok(routes.length >= 22, `only ${routes.length} routes registered`);
  for (const { method, url } of routes) {
    const name = `${method} ${url}`;
    const operation = document.paths[openApiPath(url)]?.[method.toLowerCase()];
    assert.ok(operation, `${name} is missing from the document`);
    // Request: every path parameter is described, and a route taking a body describes it.
    for (const param of url.match(/:[A-Za-z0-9_]+/g) ?? []) {
      const described = operation.parameters?.find((p) => p.in === 'path' && p.name === param.slice(1));
      assert.ok(described?.schema, `${name}: path parameter ${param} has no schema`);
    }
    const bodySchema = operation.requestBody && Object.values(operation.requestBody.content)[0]?.schema;
    // Ack and request-less updates take no body; everything else that changes something does.
    if (BODY_METHODS.has(method) && !url.endsWith('/ack')) assert.ok(bodySchema, `${name} has no request body schema`);
    // Answer: the success answer has a schema (or is an empty 204), and errors have theirs.
    const success = Object.entries(operation.responses).filter(([code]) => /^2/.test(code));
    assert.ok(success.length > 0, `${name} has no success answer`);
    for (const [code, answer] of success) {
      if (code === '204') continue;
      const schema = Object.values(answer.content ?? {})[0]?.schema;
      assert.ok(schema, `${name}: answer ${code} has no schema`);
    }
    if (url.startsWith('/v1/')) assert.ok(operation.responses['4XX']?.content, `${name}: no error answer schema`);
  }
});

test('the document carries the API field names: request and answer schemas of a carrier, the import outcome', () => {
  const createCarrier = document.paths['/v1/carriers']?.post;
  assert.ok(JSON.stringify(createCarrier?.requestBody).includes('inflightLimit'));
  const created = createCarrier?.responses['201']?.content?.['application/json']?.schema as { properties?: Record<string, unknown> } | undefined;
  assert.deepEqual(
    Object.keys(created?.properties ?? {})
      .filter((key) => ['id', 'groups', 'typeGroups'].includes(key))
      .sort(),
    ['groups', 'id', 'typeGroups'],
  );
  const importOperation = document.paths['/v1/cards/import']?.post;
  assert.ok(importOperation?.requestBody?.content['application/x-ndjson'], 'NDJSON is a documented body');
  assert.ok(importOperation?.parameters?.some((param) => param.in === 'query' && param.name === 'onExisting'));
  const answer = importOperation?.responses['200']?.content?.['application/json']?.schema as { properties?: Record<string, unknown> } | undefined;
  assert.deepEqual(Object.keys(answer?.properties ?? {}).sort(), ['accepted', 'notLanded', 'rejected', 'skipped', 'updated']);
  // Health and metrics are open; everything else needs the token.
  for (const path of ['/livez', '/readyz', '/healthz', '/metrics']) assert.deepEqual(document.paths[path]?.get?.security, [], path);
  assert.equal(document.paths['/v1/carriers']?.get?.security, undefined);
});

test('/docs serves the browsable page behind the token, like the rest of the API', async () => {
  const page = await api.call<string>('GET', '/docs');
  assert.equal(page.status, 200);
  assert.match(String(page.headers['content-type']), /text\/html/);
  assert.match(page.body, /swagger/i);
  const initializer = await api.call<string>('GET', '/docs/static/swagger-initializer.js');
  assert.equal(initializer.status, 200);
  assert.match(initializer.body, /json/);
  assert.equal((await api.call('GET', '/docs', undefined, { token: null })).status, 401);
  assert.equal((await api.call('GET', '/docs/json', undefined, { token: null })).status, 401);
});
