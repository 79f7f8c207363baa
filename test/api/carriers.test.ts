import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { carrierBody, createApiStack, iccid, type ApiStack, type ErrorAnswer } from './helpers.js';

interface Page {
  readonly items: { id: string; name: string }[];
  readonly nextCursor?: string;
}

let api: ApiStack;
before(async () => {
  api = await createApiStack('api-carriers');
});
after(async () => {
  await api.close();
});

test('POST /v1/carriers creates the account and echoes it with its id', async () => {
  const { status, body } = await api.call(
    'POST',
    '/v1/carriers',
    carrierBody('acme', {
      realnameControl: true,
      groups: [
        { name: 'main', qps: 20 },
        { name: 'rn', qps: 2 },
      ],
      typeGroups: { card_status: 'main', carddata: 'main', realname: 'rn' },
    }),
  );
  assert.equal(status, 201);
  assert.match(String(body.id), /^\d+$/);
  assert.equal(body.name, 'acme');
  assert.equal(body.gatewayAccount, 'acme-gw');
  assert.deepEqual(body.groups, [
    { name: 'main', qps: 20 },
    { name: 'rn', qps: 2 },
  ]);
  assert.deepEqual(body.typeGroups, { card_status: 'main', carddata: 'main', realname: 'rn' });
});

test('POST /v1/carriers names the field of every kind of bad input', async () => {
  const cases: [Record<string, unknown>, string][] = [
    [{ gatewayAccount: 'x' }, 'name'],
    [carrierBody('bad1', { inflightLimit: 'many' }), 'inflightLimit'],
    [carrierBody('bad2', { inflightLimit: 0 }), 'inflightLimit'],
    [carrierBody('bad3', { priorityRatio: 2 }), 'priorityRatio'],
    [carrierBody('bad4', { groups: [{ name: 'main', qps: 0 }] }), 'groups[0].qps'],
    [carrierBody('bad5', { groups: [{ name: 'main' }] }), 'groups[0].qps'],
    [carrierBody('bad6', { typeGroups: { card_status: 'nope' } }), 'typeGroups.card_status'],
    [carrierBody('bad7', { typeGroups: { package: 'main' } }), 'typeGroups.package'],
    [carrierBody('bad8', { colour: 'red' }), 'colour'],
    [carrierBody('bad9', { name: '' }), 'name'],
  ];
  for (const [input, field] of cases) {
    const { status, body } = await api.call<ErrorAnswer>('POST', '/v1/carriers', input);
    assert.equal(status, 400, `${field}: ${JSON.stringify(body)}`);
    assert.equal(body.error.code, 'invalid');
    assert.equal(body.error.field, field, JSON.stringify(body));
    assert.ok(body.error.message.length > 0);
  }
  const notJson = await api.call<ErrorAnswer>('POST', '/v1/carriers', '{"name":', { headers: { 'content-type': 'application/json' } });
  assert.equal(notJson.status, 400);
  assert.equal(notJson.body.error.field, 'body');
});

test('POST /v1/carriers answers 409 for a duplicate name', async () => {
  assert.equal((await api.call('POST', '/v1/carriers', carrierBody('dup'))).status, 201);
  const { status, body } = await api.call<ErrorAnswer>('POST', '/v1/carriers', carrierBody('dup'));
  assert.equal(status, 409);
  assert.deepEqual([body.error.code, body.error.field], ['conflict', 'name']);
});

test('POST and PATCH /v1/carriers answer 409 naming gatewayAccount for a second row on the same gateway account', async () => {
  const first = await api.call('POST', '/v1/carriers', carrierBody('gw-first', { gatewayAccount: 'one-budget-gw' }));
  assert.equal(first.status, 201);
  const second = await api.call<ErrorAnswer>('POST', '/v1/carriers', carrierBody('gw-second', { gatewayAccount: 'one-budget-gw' }));
  assert.equal(second.status, 409, JSON.stringify(second.body));
  assert.deepEqual([second.body.error.code, second.body.error.field], ['conflict', 'gatewayAccount']);
  assert.match(second.body.error.message, /one-budget-gw/);
  const third = await api.call('POST', '/v1/carriers', carrierBody('gw-third'));
  assert.equal(third.status, 201);
  const moved = await api.call<ErrorAnswer>('PATCH', `/v1/carriers/${String(third.body.id)}`, { gatewayAccount: 'one-budget-gw' });
  assert.equal(moved.status, 409, JSON.stringify(moved.body));
  assert.equal(moved.body.error.field, 'gatewayAccount');
});

test('GET /v1/carriers pages with an opaque cursor', async () => {
  for (const name of ['page-a', 'page-b', 'page-c']) await api.call('POST', '/v1/carriers', carrierBody(name));
  const seen: string[] = [];
  let cursor: string | undefined;
  do {
    const { status, body } = await api.call<Page>('GET', `/v1/carriers?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    assert.equal(status, 200);
    assert.ok(body.items.length <= 2);
    seen.push(...body.items.map((item) => item.name));
    cursor = body.nextCursor;
  } while (cursor);
  assert.ok(['page-a', 'page-b', 'page-c'].every((name) => seen.includes(name)));
  assert.equal(new Set(seen).size, seen.length, 'no account twice');
  const bad = await api.call<ErrorAnswer>('GET', '/v1/carriers?cursor=zzzz');
  assert.deepEqual([bad.status, bad.body.error.field], [400, 'cursor']);
  const badLimit = await api.call<ErrorAnswer>('GET', '/v1/carriers?limit=0');
  assert.deepEqual([badLimit.status, badLimit.body.error.field], [400, 'limit']);
});

test('GET and PATCH /v1/carriers/:id: success, 400, 404, 409', async () => {
  const created = (await api.call<{ id: string }>('POST', '/v1/carriers', carrierBody('patchme'))).body;
  const got = await api.call('GET', `/v1/carriers/${created.id}`);
  assert.deepEqual([got.status, got.body.name], [200, 'patchme']);
  const patched = await api.call('PATCH', `/v1/carriers/${created.id}`, {
    inflightLimit: 7,
    groups: [
      { name: 'main', qps: 5 },
      { name: 'extra', qps: 1 },
    ],
  });
  assert.equal(patched.status, 200);
  assert.equal(patched.body.inflightLimit, 7);
  assert.deepEqual(patched.body.groups, [
    { name: 'extra', qps: 1 },
    { name: 'main', qps: 5 },
  ]);
  const cases: [string, unknown, number, string][] = [
    [`/v1/carriers/${created.id}`, { leaseMs: 5 }, 400, 'leaseMs'],
    [`/v1/carriers/${created.id}`, {}, 400, 'body'],
    [`/v1/carriers/${created.id}`, { name: 'dup' }, 409, 'name'],
    ['/v1/carriers/999999', { inflightLimit: 3 }, 404, 'id'],
    ['/v1/carriers/abc', { inflightLimit: 3 }, 400, 'id'],
  ];
  for (const [url, input, status, field] of cases) {
    const answer = await api.call<ErrorAnswer>('PATCH', url, input);
    assert.deepEqual([answer.status, answer.body.error.field], [status, field], `${url} ${JSON.stringify(input)}: ${JSON.stringify(answer.body)}`);
  }
  assert.equal((await api.call('GET', '/v1/carriers/999999')).status, 404);
  assert.equal((await api.call('GET', '/v1/carriers/0')).status, 400);
});

test('GET /v1/carriers/:id/status: lanes, groups, lateness, capacity from the configured intervals', async () => {
  const carrier = (await api.call<{ id: string }>('POST', '/v1/carriers', carrierBody('statusacct', { groups: [{ name: 'main', qps: 20 }] }))).body;
  await api.call('POST', '/v1/polling-configs', {
    name: 'status-intervals',
    priority: 5,
    match: { carrierId: carrier.id },
    intervalsSec: { card_status: 10, carddata: 20, realname: 5 },
  });
  const cards = Array.from({ length: 100 }, (_, i) => ({ iccid: iccid(i, '8977'), carrierId: carrier.id }));
  const imported = await api.call('POST', '/v1/cards/import', cards);
  assert.equal(imported.body.accepted, 100);
  // Two unpolled cards do not count towards the need.
  await api.call('POST', '/v1/cards', { iccid: iccid(500, '8977'), carrierId: carrier.id, enablePolling: false });
  const { status, body } = await api.call<{
    carrierId: string;
    mode: string;
    paused: boolean;
    inflight: number;
    lanes: { priority: number; normal: number };
    dueNow: number;
    groups: { name: string; qpsConfigured: number; qpsEffective: number; usedLastSecond: number }[];
    latenessMs: { p50: number; p99: number };
    expiredLeases: number;
    capacity: { requiredQps: Record<string, number>; budgetQps: Record<string, number>; stretchFactor: number };
  }>('GET', `/v1/carriers/${carrier.id}/status`);
  assert.equal(status, 200);
  assert.equal(body.carrierId, carrier.id);
  assert.equal(body.mode, 'carrier');
  assert.equal(body.paused, false);
  assert.equal(body.inflight, 0);
  assert.deepEqual(body.lanes, { priority: 0, normal: 100 });
  assert.equal(typeof body.dueNow, 'number');
  assert.deepEqual(body.groups, [{ name: 'main', qpsConfigured: 20, qpsEffective: 20, usedLastSecond: 0 }]);
  assert.deepEqual(body.latenessMs, { p50: 0, p99: 0 });
  assert.equal(body.expiredLeases, 0);
  // 100/10 (card_status) + 100/20 (carddata); realname is not counted without real-name control.
  // Executions: 100/10 + 100/20 + 100/5 at most (every polled type on its own); the engine's capacity is unmeasured without a scheduler.
  assert.deepEqual(body.capacity, {
    requiredQps: { main: 15 },
    budgetQps: { main: 20 },
    requiredExecutionsPerSec: 35,
    orchestrationCapacityPerSec: null,
    stretchFactor: 1,
  });
  assert.equal((body as unknown as { limitedBy: string }).limitedBy, 'unknown');

  await api.call('PATCH', `/v1/carriers/${carrier.id}`, {
    realnameControl: true,
    groups: [{ name: 'main', qps: 5 }],
    typeGroups: { card_status: 'main', carddata: 'main', realname: 'main' },
  });
  const stretched = await api.call<{ capacity: { requiredQps: Record<string, number>; stretchFactor: number } }>('GET', `/v1/carriers/${carrier.id}/status`);
  // + 100/5 realname = 35 needed against 5.
  assert.deepEqual(stretched.body.capacity.requiredQps, { main: 35 });
  assert.equal(stretched.body.capacity.stretchFactor, 7);

  assert.equal((await api.call('GET', '/v1/carriers/999999/status')).status, 404);
  assert.equal((await api.call('GET', `/v1/carriers/${carrier.id}/status`, undefined, { token: null })).status, 401);
});

test('auth: missing, malformed or wrong token is 401 without detail; health and metrics are open', async () => {
  for (const headers of [
    {} as Record<string, string>,
    { authorization: 'Basic abc' },
    { authorization: 'Bearer wrong-token' },
    { authorization: `Bearer ${api.stack.config.API_TOKEN}x` },
  ]) {
    const { status, body, headers: answerHeaders } = await api.call<ErrorAnswer>('GET', '/v1/carriers', undefined, { token: null, headers });
    assert.equal(status, 401);
    assert.deepEqual(body, { error: { code: 'unauthorized', message: 'unauthorized' } });
    assert.equal(answerHeaders['www-authenticate'], 'Bearer');
  }
  assert.equal((await api.call('POST', '/v1/carriers', carrierBody('noauth'), { token: null })).status, 401);
  assert.equal((await api.call('GET', '/docs', undefined, { token: null })).status, 401);
  for (const path of ['/livez', '/readyz', '/healthz']) assert.equal((await api.call('GET', path, undefined, { token: null })).status, 200, path);
  assert.equal((await api.call('GET', '/metrics', undefined, { token: null })).status, 200);
});
