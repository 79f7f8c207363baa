import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { recordFailure, evaluateAccountAlert } from '../../src/db/alerts.js';
import { carrierBody, createApiStack, iccid, type ApiStack, type ErrorAnswer } from './helpers.js';

let api: ApiStack;
before(async () => {
  api = await createApiStack('api-ops');
});
after(async () => {
  await api.close();
});

test('polling configs: create, list, get, patch, delete; 400 per field, 404, 409', async () => {
  const created = await api.call<{ id: string; intervalsSec: Record<string, number> }>('POST', '/v1/polling-configs', {
    name: 'base',
    priority: 1,
    match: { cardStatus: 'active' },
    intervalsSec: { card_status: 60, package: 3600 },
  });
  assert.equal(created.status, 201);
  assert.deepEqual(created.body.intervalsSec, { card_status: 60, package: 3600 });
  const cases: [unknown, string][] = [
    [{ intervalsSec: {} }, 'name'],
    [{ name: 'x' }, 'intervalsSec'],
    [{ name: 'x', intervalsSec: { card_status: 0 } }, 'intervalsSec.card_status'],
    [{ name: 'x', intervalsSec: { weather: 5 } }, 'intervalsSec.weather'],
    [{ name: 'x', intervalsSec: { card_status: 'often' } }, 'intervalsSec.card_status'],
    [{ name: 'x', intervalsSec: {}, match: { cardStatus: 'flying' } }, 'match.cardStatus'],
    [{ name: 'x', intervalsSec: {}, match: { iccid: '1' } }, 'match.iccid'],
    [{ name: 'x', intervalsSec: {}, match: { carrierId: 'abc' } }, 'match.carrierId'],
  ];
  for (const [input, field] of cases) {
    const answer = await api.call<ErrorAnswer>('POST', '/v1/polling-configs', input);
    assert.deepEqual([answer.status, answer.body.error.field], [400, field], `${JSON.stringify(input)} → ${JSON.stringify(answer.body)}`);
  }
  assert.equal((await api.call<ErrorAnswer>('POST', '/v1/polling-configs', { name: 'base', intervalsSec: {} })).status, 409);
  const list = await api.call<{ items: { name: string }[] }>('GET', '/v1/polling-configs');
  assert.deepEqual(
    list.body.items.map((config) => config.name),
    ['base'],
  );
  assert.equal((await api.call('GET', `/v1/polling-configs/${created.body.id}`)).body.name, 'base');
  const patched = await api.call<{ intervalsSec: Record<string, number> }>('PATCH', `/v1/polling-configs/${created.body.id}`, {
    intervalsSec: { carddata: 120 },
  });
  assert.deepEqual(patched.body.intervalsSec, { carddata: 120 });
  assert.equal((await api.call<ErrorAnswer>('PATCH', `/v1/polling-configs/${created.body.id}`, { priority: 1.5 })).body.error.field, 'priority');
  assert.equal((await api.call('PATCH', '/v1/polling-configs/999999', { priority: 2 })).status, 404);
  assert.equal((await api.call('DELETE', `/v1/polling-configs/${created.body.id}`)).status, 204);
  assert.equal((await api.call('DELETE', `/v1/polling-configs/${created.body.id}`)).status, 404);
  assert.equal((await api.call('GET', `/v1/polling-configs/${created.body.id}`)).status, 404);
});

test('mode: GET answers the stored mode; PUT validates and needs pollingControl (503 when down)', async () => {
  const got = await api.call('GET', '/v1/mode');
  assert.deepEqual([got.status, got.body.mode], [200, 'carrier']);
  for (const input of [{}, { mode: 'turbo' }, { mode: 'legacy', now: true }]) {
    const answer = await api.call<ErrorAnswer>('PUT', '/v1/mode', input);
    assert.equal(answer.status, 400, JSON.stringify(answer.body));
  }
  assert.equal((await api.call<ErrorAnswer>('PUT', '/v1/mode', { mode: 'turbo' })).body.error.field, 'mode');
  const down = await api.call<ErrorAnswer>('PUT', '/v1/mode', { mode: 'legacy' });
  assert.deepEqual([down.status, down.body.error.code], [503, 'unavailable']);
});

test('alerts: list failure and account alerts with paging and filters, ack both kinds, 400, 404', async () => {
  const carrier = (await api.call<{ id: string }>('POST', '/v1/carriers', carrierBody('alerting'))).body;
  const cardIds: string[] = [];
  for (let i = 0; i < 3; i += 1)
    cardIds.push((await api.call<{ id: string }>('POST', '/v1/cards', { iccid: iccid(i, '8955'), carrierId: carrier.id })).body.id);
  for (const cardId of cardIds)
    await recordFailure(api.stack.db.pool, { cardId, carrierId: carrier.id, type: 'card_status', failCount: 5, error: 'transient|timeout', threshold: 3 });
  await evaluateAccountAlert(api.stack.db.pool, { carrierId: carrier.id, threshold: 2, windowMs: 600_000 });

  const all = await api.call<{ items: { id: string; kind: string }[] }>('GET', '/v1/alerts');
  assert.equal(all.status, 200);
  assert.deepEqual(
    all.body.items.map((item) => item.kind),
    ['account', 'failure', 'failure', 'failure'],
  );
  const seen: string[] = [];
  let cursor: string | undefined;
  do {
    const page: { body: { items: { id: string }[]; nextCursor?: string } } = await api.call('GET', `/v1/alerts?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
    seen.push(...page.body.items.map((item) => item.id));
    cursor = page.body.nextCursor;
  } while (cursor);
  assert.deepEqual(
    seen,
    all.body.items.map((item) => item.id),
  );
  const ofCard = await api.call<{ items: { cardId: string }[] }>('GET', `/v1/alerts?cardId=${cardIds[0]}`);
  assert.deepEqual(
    ofCard.body.items.map((item) => item.cardId),
    [cardIds[0]],
  );
  const accountOnly = await api.call<{ items: { kind: string; alertKind: string }[] }>('GET', `/v1/alerts?kind=account&carrierId=${carrier.id}`);
  assert.deepEqual(
    accountOnly.body.items.map((item) => item.alertKind),
    ['failure_burst'],
  );

  const failureId = all.body.items[1]!.id;
  const acked = await api.call('POST', `/v1/alerts/${failureId}/ack`);
  assert.equal(acked.status, 200);
  assert.equal(acked.body.id, failureId);
  assert.ok(acked.body.ackedAt);
  const bare = await api.call('POST', `/v1/alerts/${failureId.replace('failure-', '')}/ack`);
  assert.equal(bare.body.ackedAt, acked.body.ackedAt, 'idempotent: the first ack is kept');
  const accountAck = await api.call('POST', `/v1/alerts/${all.body.items[0]!.id}/ack`);
  assert.deepEqual([accountAck.status, accountAck.body.kind, typeof accountAck.body.ackedAt], [200, 'account', 'string']);

  assert.equal((await api.call('POST', '/v1/alerts/failure-999999/ack')).status, 404);
  assert.equal((await api.call('POST', '/v1/alerts/account-999999/ack')).status, 404);
  assert.equal((await api.call<ErrorAnswer>('POST', '/v1/alerts/banana/ack')).body.error.field, 'id');
  for (const [query, field] of [
    ['kind=weird', 'kind'],
    ['status=closed', 'status'],
    ['cursor=abc', 'cursor'],
  ]) {
    assert.equal((await api.call<ErrorAnswer>('GET', `/v1/alerts?${query}`)).body.error.field, field);
  }
});

test('livez answers; readyz and its alias healthz report every dependency; metrics serve the registry with HTTP request metrics', async () => {
  const live = await api.call('GET', '/livez', undefined, { token: null });
  assert.deepEqual([live.status, live.body], [200, { status: 'ok' }]);
  for (const path of ['/readyz', '/healthz']) {
    const health = await api.call<{ status: string; checks: Record<string, { ok: boolean }> }>('GET', path, undefined, { token: null });
    assert.equal(health.status, 200, path);
    assert.equal(health.body.status, 'ok', path);
    assert.deepEqual(Object.keys(health.body.checks).sort(), ['postgres', 'redis', 'temporal'], path);
  }
  const metrics = await api.call<string>('GET', '/metrics', undefined, { token: null });
  assert.equal(metrics.status, 200);
  assert.match(String(metrics.headers['content-type']), /text\/plain/);
  assert.match(metrics.body, /cardpoller_http_request_duration_seconds_count\{method="GET",route="\/healthz",status="200"\}/);
  assert.match(metrics.body, /# HELP cardpoller_checks_total/);
});

test('unknown routes answer 404 in the error shape; /docs/json lists every /v1 path', async () => {
  const missing = await api.call<ErrorAnswer>('GET', '/v1/nothing');
  assert.deepEqual([missing.status, missing.body.error.code], [404, 'not_found']);
  const docs = await api.call<{ openapi: string; paths: Record<string, Record<string, unknown>> }>('GET', '/docs/json');
  assert.equal(docs.status, 200);
  const operations = Object.entries(docs.body.paths).flatMap(([path, methods]) => Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`));
  const required = [
    'POST /v1/carriers',
    'GET /v1/carriers',
    'GET /v1/carriers/{id}',
    'PATCH /v1/carriers/{id}',
    'GET /v1/carriers/{id}/status',
    'POST /v1/polling-configs',
    'GET /v1/polling-configs',
    'PATCH /v1/polling-configs/{id}',
    'DELETE /v1/polling-configs/{id}',
    'POST /v1/cards',
    'GET /v1/cards',
    'POST /v1/cards/import',
    'GET /v1/cards/{id}',
    'PATCH /v1/cards/{id}',
    'DELETE /v1/cards/{id}',
    'POST /v1/cards/{id}/request-check',
    'POST /v1/request-checks',
    'GET /v1/mode',
    'PUT /v1/mode',
    'GET /v1/alerts',
    'POST /v1/alerts/{id}/ack',
    'GET /livez',
    'GET /readyz',
    'GET /healthz',
    'GET /metrics',
  ];
  for (const operation of required) assert.ok(operations.includes(operation), `missing ${operation}`);
  assert.ok(JSON.stringify(docs.body.paths['/v1/carriers']?.post).includes('inflightLimit'), 'request schemas are in the document');
});
