import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCarrier, getCarrier, listCarriers, updateCarrier } from '../../src/db/carriers.js';
import { DomainError } from '../../src/domain/errors.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { makeCarrier } from './fixtures.js';

let db: TestDb;
before(async () => {
  db = await createTestDb('carriers');
});
after(() => db.close());

function isDomain(code: DomainError['code'], field: string) {
  return (error: unknown): boolean => {
    assert.ok(error instanceof DomainError, `expected DomainError, got ${String(error)}`);
    assert.equal(error.code, code);
    assert.equal(error.field, field);
    return true;
  };
}

test('carrier: create returns the domain shape with groups and type map; ids are strings', async () => {
  const carrier = await makeCarrier(db.pool, 'cmcc-a');
  assert.match(carrier.id, /^[0-9]+$/);
  assert.equal(carrier.name, 'cmcc-a');
  assert.equal(carrier.gatewayAccount, 'gw-cmcc-a');
  assert.equal(carrier.inflightLimit, 50);
  assert.equal(carrier.priorityRatio, 0.2);
  assert.deepEqual(carrier.groups, [
    { name: 'data', qps: 20 },
    { name: 'status', qps: 50 },
  ]);
  assert.deepEqual(carrier.typeGroups, { card_status: 'status', carddata: 'data', realname: 'status' });
  assert.deepEqual(await getCarrier(db.pool, carrier.id), carrier);
});

test('carrier: bad input names the field and writes nothing', async () => {
  const before = (await listCarriers(db.pool)).length;
  await assert.rejects(createCarrier(db.pool, { name: 'neg', gatewayAccount: 'g', groups: [{ name: 'g', qps: -1 }] }), isDomain('invalid', 'groups[0].qps'));
  await assert.rejects(createCarrier(db.pool, { name: 'ratio', gatewayAccount: 'g', priorityRatio: 1.5 }), isDomain('invalid', 'priorityRatio'));
  await assert.rejects(
    createCarrier(db.pool, { name: 'tg', gatewayAccount: 'g', groups: [{ name: 'a', qps: 1 }], typeGroups: { card_status: 'nope' } }),
    isDomain('invalid', 'typeGroups.card_status'),
  );
  // A cross-field table check fails after the account row was inserted: the transaction rolls it back.
  await assert.rejects(
    createCarrier(db.pool, { name: 'timeouts', gatewayAccount: 'g', leaseMs: 5000, totalTimeoutMs: 9000, groups: [{ name: 'a', qps: 1 }] }),
    isDomain('invalid', 'totalTimeoutMs'),
  );
  await makeCarrier(db.pool, 'dup');
  await assert.rejects(makeCarrier(db.pool, 'dup'), isDomain('conflict', 'name'));
  assert.equal((await listCarriers(db.pool)).length, before + 1);
  const { rows } = await db.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM rate_limit_group g JOIN carrier_account a ON a.id = g.carrier_id WHERE a.name = ANY($1)',
    [['neg', 'timeouts']],
  );
  assert.equal(rows[0]!.n, 0);
  await assert.rejects(getCarrier(db.pool, '999999'), isDomain('not_found', 'carrierId'));
});

test('carrier: patch scalars, replace groups keeps mappings of surviving groups', async () => {
  const carrier = await makeCarrier(db.pool, 'patch-me');
  const patched = await updateCarrier(db.pool, carrier.id, { inflightLimit: 7, enabled: false, groups: [{ name: 'status', qps: 10 }] });
  assert.equal(patched.inflightLimit, 7);
  assert.equal(patched.enabled, false);
  assert.deepEqual(patched.groups, [{ name: 'status', qps: 10 }]);
  // carddata pointed at the dropped "data" group: the FK cascade removed only that mapping.
  assert.deepEqual(patched.typeGroups, { card_status: 'status', realname: 'status' });
  await assert.rejects(updateCarrier(db.pool, carrier.id, { typeGroups: { carddata: 'data' } }), isDomain('invalid', 'typeGroups.carddata'));
  await assert.rejects(updateCarrier(db.pool, carrier.id, { groups: [{ name: 'x', qps: 0 }] }), isDomain('invalid', 'groups[0].qps'));
  assert.deepEqual(await getCarrier(db.pool, carrier.id), patched);
  await assert.rejects(updateCarrier(db.pool, '424242', { enabled: true }), isDomain('not_found', 'id'));
});
