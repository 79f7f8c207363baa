/**
 * Bad input answers 400 naming the field (and the value) instead of reaching PostgreSQL or an
 * activity that refuses it: ids the database cannot hold, and numbers beyond what the tables and
 * the request-check activity accept.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { RequestCheckInvalid, validateRequestCheck } from '../../src/workflow-safe/requestCheckValidation.js';
import { carrierBody, createApiStack, iccid, type ApiStack, type ErrorAnswer } from './helpers.js';

const INT8_MAX = '9223372036854775807';
const ABOVE_INT8_MAX = '9223372036854775808';

let api: ApiStack;
let carrierId: string;
let cardId: string;
before(async () => {
  api = await createApiStack('api-bounds');
  carrierId = String((await api.call('POST', '/v1/carriers', carrierBody('bounds'))).body.id);
  await api.call('POST', '/v1/polling-configs', { name: 'bounds', intervalsSec: { card_status: 3600 } });
  cardId = String((await api.call('POST', '/v1/cards', { iccid: iccid(1), carrierId })).body.id);
});
after(async () => {
  await api.close();
});

function assertNamed(answer: { status: number; body: ErrorAnswer }, field: string, value: string | undefined, what: string): void {
  assert.equal(answer.status, 400, `${what}: ${JSON.stringify(answer.body)}`);
  assert.equal(answer.body.error.code, 'invalid', what);
  assert.equal(answer.body.error.field, field, `${what}: ${JSON.stringify(answer.body)}`);
  if (value !== undefined)
    assert.ok(answer.body.error.message.includes(JSON.stringify(value)), `${what}: the message names the value: ${answer.body.error.message}`);
}

test('ids the database cannot hold (0, leading zeros, above the int8 maximum) are 400 naming the field and the value, wherever they come in', async () => {
  for (const bad of [ABOVE_INT8_MAX, '0', '007', '99999999999999999999']) {
    assertNamed(await api.call<ErrorAnswer>('GET', `/v1/carriers/${bad}`), 'id', bad, `GET /v1/carriers/${bad}`);
    assertNamed(await api.call<ErrorAnswer>('GET', `/v1/carriers/${bad}/status`), 'id', bad, `GET /v1/carriers/${bad}/status`);
    assertNamed(await api.call<ErrorAnswer>('PATCH', `/v1/carriers/${bad}`, { enabled: true }), 'id', bad, `PATCH /v1/carriers/${bad}`);
    assertNamed(await api.call<ErrorAnswer>('GET', `/v1/cards/${bad}`), 'id', bad, `GET /v1/cards/${bad}`);
    assertNamed(await api.call<ErrorAnswer>('DELETE', `/v1/cards/${bad}`), 'id', bad, `DELETE /v1/cards/${bad}`);
    assertNamed(
      await api.call<ErrorAnswer>('POST', `/v1/cards/${bad}/request-check`, { types: ['card_status'] }),
      'id',
      bad,
      `POST /v1/cards/${bad}/request-check`,
    );
    assertNamed(await api.call<ErrorAnswer>('GET', `/v1/cards?carrierId=${bad}`), 'carrierId', bad, `GET /v1/cards?carrierId=${bad}`);
    assertNamed(await api.call<ErrorAnswer>('GET', `/v1/alerts?carrierId=${bad}`), 'carrierId', bad, `GET /v1/alerts?carrierId=${bad}`);
    assertNamed(await api.call<ErrorAnswer>('GET', `/v1/alerts?cardId=${bad}`), 'cardId', bad, `GET /v1/alerts?cardId=${bad}`);
    assertNamed(await api.call<ErrorAnswer>('POST', '/v1/cards', { iccid: iccid(2), carrierId: bad }), 'carrierId', bad, 'POST /v1/cards carrierId');
    assertNamed(await api.call<ErrorAnswer>('POST', '/v1/cards', { iccid: iccid(3), carrierId, deviceId: bad }), 'deviceId', bad, 'POST /v1/cards deviceId');
    assertNamed(await api.call<ErrorAnswer>('PATCH', `/v1/cards/${cardId}`, { carrierId: bad }), 'carrierId', bad, 'PATCH /v1/cards carrierId');
    assertNamed(
      await api.call<ErrorAnswer>('POST', '/v1/polling-configs', { name: `m-${bad}`, match: { carrierId: bad }, intervalsSec: { card_status: 600 } }),
      'match.carrierId',
      bad,
      'POST /v1/polling-configs match.carrierId',
    );
  }
  // An import names such a row and lands the others (its batch does not fail in the database).
  const imported = await api.call<{ accepted: number; rejected: { row: number; field: string }[]; notLanded?: unknown[] }>('POST', '/v1/cards/import', [
    { iccid: iccid(10), carrierId },
    { iccid: iccid(11), carrierId: ABOVE_INT8_MAX },
    { iccid: iccid(12), carrierId, deviceId: ABOVE_INT8_MAX },
  ]);
  assert.equal(imported.status, 200, JSON.stringify(imported.body));
  assert.equal(imported.body.accepted, 1, JSON.stringify(imported.body));
  assert.deepEqual(
    imported.body.rejected.map(({ row, field }) => [row, field]),
    [
      [1, 'carrierId'],
      [2, 'deviceId'],
    ],
  );
  assert.equal(imported.body.notLanded, undefined);
  // The largest id the database holds is an id: looked up, and not found.
  assert.equal((await api.call<ErrorAnswer>('GET', `/v1/carriers/${INT8_MAX}`)).status, 404);
  assert.equal((await api.call<ErrorAnswer>('GET', `/v1/cards/${INT8_MAX}`)).status, 404);
});

test('the request-check validation (API and the scheduler update validator) accepts the ids the database holds, no others', () => {
  const input = (id: string) => ({ cardId: id, types: ['card_status' as const] });
  for (const bad of ['0', '007', '-1', '1.5', ABOVE_INT8_MAX, '12345678901234567890', '']) {
    assert.throws(
      () => validateRequestCheck(input(bad)),
      (error: unknown) => error instanceof RequestCheckInvalid && error.field === 'cardId' && error.message.includes(JSON.stringify(bad)),
      bad,
    );
  }
  for (const good of ['1', '42', INT8_MAX, '9223372036854775799', '999999999999999999']) assert.doesNotThrow(() => validateRequestCheck(input(good)), good);
});

test('request-check: a cooldown, delay list or expected state beyond what the priority item accepts is 400 naming the field', async () => {
  const cases: [Record<string, unknown>, string][] = [
    [{ types: ['card_status'], cooldownMs: 86_400_001 }, 'cooldownMs'],
    [{ types: ['card_status'], cooldownMs: 1e12 }, 'cooldownMs'],
    [{ types: ['card_status'], confirmDelaysSec: [3601], expected: 'offline' }, 'confirmDelaysSec[0]'],
    [{ types: ['card_status'], confirmDelaysSec: Array.from({ length: 21 }, () => 10), expected: 'offline' }, 'confirmDelaysSec'],
    [{ types: ['card_status'], expected: 'x'.repeat(65) }, 'expected'],
  ];
  for (const [input, field] of cases) {
    const answer = await api.call<ErrorAnswer>('POST', `/v1/cards/${cardId}/request-check`, input);
    assert.deepEqual([answer.status, answer.body.error.field], [400, field], `${JSON.stringify(input).slice(0, 120)} → ${JSON.stringify(answer.body)}`);
  }
  assert.throws(
    () => validateRequestCheck({ cardId, types: ['card_status'], cooldownMs: 86_400_001 }),
    (error: unknown) => error instanceof RequestCheckInvalid && error.field === 'cooldownMs',
  );
});

test('every numeric field of the carrier and polling-config bodies is 400 naming it just past either bound', async () => {
  const carrierCases: [string, number][] = [
    ['inflightLimit', 0],
    ['inflightLimit', 100_001],
    ['priorityRatio', -0.1],
    ['priorityRatio', 1.1],
    ['leaseMs', 999],
    ['leaseMs', 3_600_001],
    ['stepTimeoutMs', 99],
    ['stepTimeoutMs', 600_001],
    ['totalTimeoutMs', 99],
    ['totalTimeoutMs', 3_600_001],
    ['backoffBaseMs', 99],
    ['backoffBaseMs', 86_400_001],
    ['failureAlertThreshold', 0],
    ['failureAlertThreshold', 1001],
    ['accountAlertThreshold', 0],
    ['accountAlertThreshold', 1_000_001],
    ['accountAlertWindowMs', 999],
    ['accountAlertWindowMs', 604_800_001],
    ['inflightLimit', 2 ** 31],
    ['leaseMs', 1e300],
  ];
  for (const [field, value] of carrierCases) {
    const what = `${field}=${value}`;
    assertNamed(await api.call<ErrorAnswer>('POST', '/v1/carriers', carrierBody(`b-${field}-${value}`, { [field]: value })), field, undefined, `POST ${what}`);
    assertNamed(await api.call<ErrorAnswer>('PATCH', `/v1/carriers/${carrierId}`, { [field]: value }), field, undefined, `PATCH ${what}`);
  }
  for (const qps of [0, 100_001, 1e12]) {
    assertNamed(
      await api.call<ErrorAnswer>('POST', '/v1/carriers', carrierBody(`b-qps-${qps}`, { groups: [{ name: 'main', qps }] })),
      'groups[0].qps',
      undefined,
      `qps=${qps}`,
    );
  }
  const configCases: [Record<string, unknown>, string][] = [
    [{ name: 'p-hi', priority: 1_000_001, intervalsSec: { card_status: 600 } }, 'priority'],
    [{ name: 'p-lo', priority: -1_000_001, intervalsSec: { card_status: 600 } }, 'priority'],
    [{ name: 'p-big', priority: 2 ** 31, intervalsSec: { card_status: 600 } }, 'priority'],
    [{ name: 'i-hi', intervalsSec: { card_status: 34_560_001 } }, 'intervalsSec.card_status'],
    [{ name: 'i-big', intervalsSec: { carddata: 2 ** 31 } }, 'intervalsSec.carddata'],
    [{ name: 'i-lo', intervalsSec: { realname: 0 } }, 'intervalsSec.realname'],
  ];
  for (const [body, field] of configCases) {
    assertNamed(await api.call<ErrorAnswer>('POST', '/v1/polling-configs', body), field, undefined, JSON.stringify(body));
  }
});
