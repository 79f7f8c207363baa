import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { carrierBody, createApiStack, iccid, type ApiStack, type ErrorAnswer } from './helpers.js';

interface Card {
  readonly id: string;
  readonly iccid: string;
  readonly carrierId: string;
  readonly status: string;
  readonly enablePolling: boolean;
  readonly polled: boolean;
}

interface Detail extends Card {
  readonly due: Record<string, number>;
  readonly failures: Record<string, { count: number }>;
  readonly alerts: unknown[];
  readonly executions: unknown[];
  readonly temporalUiUrl: string;
}

let api: ApiStack;
let carrierId: string;
let otherCarrierId: string;

before(async () => {
  api = await createApiStack('api-cards');
  carrierId = (await api.call<{ id: string }>('POST', '/v1/carriers', carrierBody('cards-a'))).body.id;
  otherCarrierId = (await api.call<{ id: string }>('POST', '/v1/carriers', carrierBody('cards-b'))).body.id;
  await api.call('POST', '/v1/polling-configs', { name: 'all-cards', intervalsSec: { card_status: 60, carddata: 300 } });
});
after(async () => {
  await api.close();
});

test('POST /v1/cards: 201, 400 per field, 404 unknown account, 409 duplicate ICCID', async () => {
  const created = await api.call<Card>('POST', '/v1/cards', { iccid: iccid(1), carrierId, msisdn: '+8613800000001' });
  assert.equal(created.status, 201);
  assert.equal(created.body.iccid, iccid(1));
  assert.equal(created.body.polled, true);
  const cases: [Record<string, unknown>, number, string][] = [
    [{ iccid: '123', carrierId }, 400, 'iccid'],
    [{ carrierId }, 400, 'iccid'],
    [{ iccid: iccid(2) }, 400, 'carrierId'],
    [{ iccid: iccid(2), carrierId, status: 'flying' }, 400, 'status'],
    [{ iccid: iccid(2), carrierId, msisdn: 'abc' }, 400, 'msisdn'],
    [{ iccid: iccid(2), carrierId, enablePolling: 'yes' }, 400, 'enablePolling'],
    [{ iccid: iccid(2), carrierId, shoeSize: 42 }, 400, 'shoeSize'],
    [{ iccid: iccid(2), carrierId: '999999' }, 404, 'carrierId'],
    [{ iccid: iccid(2), carrierId, deviceId: '999999' }, 404, 'deviceId'],
    [{ iccid: iccid(1), carrierId }, 409, 'iccid'],
  ];
  for (const [input, status, field] of cases) {
    const answer = await api.call<ErrorAnswer>('POST', '/v1/cards', input);
    assert.deepEqual([answer.status, answer.body.error.field], [status, field], `${JSON.stringify(input)} → ${JSON.stringify(answer.body)}`);
  }
});

test('GET /v1/cards filters by carrierId, status, polled and pages', async () => {
  for (let i = 10; i < 15; i += 1)
    await api.call('POST', '/v1/cards', { iccid: iccid(i), carrierId: otherCarrierId, status: i % 2 === 0 ? 'active' : 'test', enablePolling: i !== 14 });
  const all = await api.call<{ items: Card[]; nextCursor?: string }>('GET', `/v1/cards?carrierId=${otherCarrierId}`);
  assert.equal(all.body.items.length, 5);
  assert.equal(all.body.nextCursor, undefined);
  const tests = await api.call<{ items: Card[] }>('GET', `/v1/cards?carrierId=${otherCarrierId}&status=test`);
  assert.deepEqual(
    tests.body.items.map((card) => card.iccid),
    [iccid(11), iccid(13)],
  );
  const unpolled = await api.call<{ items: Card[] }>('GET', `/v1/cards?carrierId=${otherCarrierId}&polled=false`);
  assert.deepEqual(
    unpolled.body.items.map((card) => card.iccid),
    [iccid(14)],
  );
  const first = await api.call<{ items: Card[]; nextCursor?: string }>('GET', `/v1/cards?carrierId=${otherCarrierId}&limit=3`);
  assert.equal(first.body.items.length, 3);
  assert.ok(first.body.nextCursor);
  const second = await api.call<{ items: Card[]; nextCursor?: string }>('GET', `/v1/cards?carrierId=${otherCarrierId}&limit=3&cursor=${first.body.nextCursor}`);
  assert.deepEqual(
    second.body.items.map((card) => card.iccid),
    [iccid(13), iccid(14)],
  );
  assert.equal(second.body.nextCursor, undefined);
  for (const [query, field] of [
    ['status=flying', 'status'],
    ['polled=maybe', 'polled'],
    ['carrierId=x', 'carrierId'],
    ['limit=5000', 'limit'],
    ['cursor=!!', 'cursor'],
    ['colour=red', 'colour'],
  ]) {
    const answer = await api.call<ErrorAnswer>('GET', `/v1/cards?${query}`);
    assert.deepEqual([answer.status, answer.body.error.field], [400, field], `${query}: ${JSON.stringify(answer.body)}`);
  }
});

test('GET /v1/cards/:id: card, due per type, failures, alerts, executions, Web UI link', async () => {
  const card = (await api.call<Card>('POST', '/v1/cards', { iccid: iccid(20), carrierId })).body;
  const { status, body } = await api.call<Detail>('GET', `/v1/cards/${card.id}`);
  assert.equal(status, 200);
  assert.equal(body.id, card.id);
  assert.equal(body.iccid, iccid(20));
  assert.deepEqual(Object.keys(body.due).sort(), ['card_status', 'carddata']);
  assert.ok(Object.values(body.due).every((ms) => typeof ms === 'number' && ms > Date.now() - 60_000));
  assert.deepEqual(body.failures, {});
  assert.deepEqual(body.alerts, []);
  assert.deepEqual(body.executions, []);
  const expected =
    `${api.stack.config.TEMPORAL_UI_URL.replace(/\/$/, '')}/namespaces/${api.stack.config.TEMPORAL_NAMESPACE}` +
    `/workflows?query=${encodeURIComponent(`CardId="${card.id}"`)}`;
  assert.equal(body.temporalUiUrl, expected);
  assert.equal((await api.call<ErrorAnswer>('GET', '/v1/cards/999999')).status, 404);
  assert.equal((await api.call<ErrorAnswer>('GET', '/v1/cards/abc')).body.error.field, 'id');
});

test('PATCH /v1/cards/:id: polling switch, status, carrier; 400, 404', async () => {
  const card = (await api.call<Card>('POST', '/v1/cards', { iccid: iccid(30), carrierId })).body;
  const off = await api.call<Card>('PATCH', `/v1/cards/${card.id}`, { enablePolling: false });
  assert.deepEqual([off.status, off.body.enablePolling, off.body.polled], [200, false, false]);
  assert.deepEqual((await api.call<Detail>('GET', `/v1/cards/${card.id}`)).body.due, {});
  const on = await api.call<Card>('PATCH', `/v1/cards/${card.id}`, { enablePolling: true, status: 'suspended' });
  assert.deepEqual([on.body.polled, on.body.status], [true, 'suspended']);
  const moved = await api.call<Card>('PATCH', `/v1/cards/${card.id}`, { carrierId: otherCarrierId });
  assert.equal(moved.body.carrierId, otherCarrierId);
  const lanes = await api.stack.deps.store.laneOf(otherCarrierId, card.id);
  assert.equal(lanes, 'normal');
  assert.equal(await api.stack.deps.store.laneOf(carrierId, card.id), null);
  const cases: [string, unknown, number, string][] = [
    [`/v1/cards/${card.id}`, {}, 400, 'body'],
    [`/v1/cards/${card.id}`, { status: 'flying' }, 400, 'status'],
    [`/v1/cards/${card.id}`, { enablePolling: 'on' }, 400, 'enablePolling'],
    [`/v1/cards/${card.id}`, { iccid: iccid(31) }, 400, 'iccid'],
    [`/v1/cards/${card.id}`, { carrierId: '999999' }, 404, 'carrierId'],
    ['/v1/cards/999999', { status: 'active' }, 404, 'cardId'],
  ];
  for (const [url, input, status, field] of cases) {
    const answer = await api.call<ErrorAnswer>('PATCH', url, input);
    assert.deepEqual([answer.status, answer.body.error.field], [status, field], `${JSON.stringify(input)} → ${JSON.stringify(answer.body)}`);
  }
});

test('DELETE /v1/cards/:id: 204, then 404', async () => {
  const card = (await api.call<Card>('POST', '/v1/cards', { iccid: iccid(40), carrierId })).body;
  assert.equal((await api.call('DELETE', `/v1/cards/${card.id}`)).status, 204);
  assert.equal(await api.stack.deps.store.laneOf(carrierId, card.id), null);
  assert.equal((await api.call('DELETE', `/v1/cards/${card.id}`)).status, 404);
  assert.equal((await api.call('GET', `/v1/cards/${card.id}`)).status, 404);
  assert.equal((await api.call('DELETE', '/v1/cards/x')).status, 400);
});

test('POST /v1/cards/:id/request-check: validation, 404, 503 without the orchestration', async () => {
  const card = (await api.call<Card>('POST', '/v1/cards', { iccid: iccid(50), carrierId })).body;
  const cases: [unknown, string][] = [
    [{}, 'types'],
    [{ types: [] }, 'types'],
    [{ types: ['weather'] }, 'types[0]'],
    [{ types: ['card_status'], lane: 'fast' }, 'lane'],
    [{ types: ['card_status'], cooldownMs: -1 }, 'cooldownMs'],
    [{ types: ['card_status'], confirmDelaysSec: [10, 30] }, 'expected'],
    [{ types: ['card_status'], confirmDelaysSec: [0], expected: 'offline' }, 'confirmDelaysSec[0]'],
    [{ types: ['card_status'], expected: 'a|b' }, 'expected'],
    [{ types: ['card_status'], colour: 1 }, 'colour'],
  ];
  for (const [input, field] of cases) {
    const answer = await api.call<ErrorAnswer>('POST', `/v1/cards/${card.id}/request-check`, input);
    assert.deepEqual([answer.status, answer.body.error.field], [400, field], `${JSON.stringify(input)} → ${JSON.stringify(answer.body)}`);
  }
  assert.equal((await api.call('POST', '/v1/cards/999999/request-check', { types: ['card_status'] })).status, 404);
  const down = await api.call<ErrorAnswer>('POST', `/v1/cards/${card.id}/request-check`, { types: ['card_status'] });
  assert.equal(down.status, 503);
  assert.equal(down.body.error.code, 'unavailable');
});
