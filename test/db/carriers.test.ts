import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCarrier, getCarrier, listCarriers, updateCarrier } from '../../src/db/carriers.js';
import { migrate, readMigrations } from '../../src/db/migrate.js';
import { DomainError } from '../../src/domain/errors.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
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

/*
 * One gateway account, one row: the carrier's budget belongs to its account at the carrier, and
 * each of our rows gets its own limiter, so two rows on one gateway account would each spend the
 * whole budget.
 */
test('carrier: a second row for the same gateway account is refused (409 conflict on gatewayAccount), by create and by patch', async () => {
  const first = await createCarrier(db.pool, { name: 'gw-one-a', gatewayAccount: 'shared-gw', groups: [{ name: 'main', qps: 10 }] });
  await assert.rejects(createCarrier(db.pool, { name: 'gw-one-b', gatewayAccount: 'shared-gw', groups: [{ name: 'main', qps: 10 }] }), (error: unknown) => {
    isDomain('conflict', 'gatewayAccount')(error);
    assert.match((error as Error).message, /shared-gw/);
    return true;
  });
  // Surrounding blanks are not another account: values are stored trimmed.
  await assert.rejects(createCarrier(db.pool, { name: 'gw-one-c', gatewayAccount: '  shared-gw ' }), isDomain('conflict', 'gatewayAccount'));
  const other = await createCarrier(db.pool, { name: 'gw-one-d', gatewayAccount: 'other-gw' });
  await assert.rejects(updateCarrier(db.pool, other.id, { gatewayAccount: 'shared-gw' }), isDomain('conflict', 'gatewayAccount'));
  // Written by hand, past the API: the table refuses it too.
  await assert.rejects(
    db.pool.query(`INSERT INTO carrier_account (name, gateway_account) VALUES ('by-hand', 'shared-gw')`),
    /carrier_account_gateway_account_key/,
  );
  // Renaming its own gateway account to itself, or to a free one, is fine.
  assert.equal((await updateCarrier(db.pool, first.id, { gatewayAccount: 'shared-gw' })).gatewayAccount, 'shared-gw');
  assert.equal((await updateCarrier(db.pool, other.id, { gatewayAccount: 'free-gw' })).gatewayAccount, 'free-gw');
});

test('migration 000013 on a database that already has two rows on one gateway account stops, naming the rows, and changes nothing', async () => {
  const before13 = readMigrations().filter((migration) => migration.version < 13);
  const old = await createTestDb('carriers-dup-gw', { migrate: false });
  try {
    await migrate(old.pool, old.schema, before13);
    await old.pool.query(
      `INSERT INTO carrier_account (name, gateway_account) VALUES ('dup-a', 'same-gw'), ('dup-b', 'same-gw '), ('alone', 'alone-gw'), ('dup-c', 'other-gw'), ('dup-d', 'other-gw')`,
    );
    await assert.rejects(migrate(old.pool, old.schema), (error: unknown) => {
      const message = (error as Error).message;
      assert.match(message, /000013|13_/);
      for (const name of ['dup-a', 'dup-b', 'dup-c', 'dup-d']) assert.ok(message.includes(name), `names ${name}: ${message}`);
      assert.ok(message.includes('same-gw') && message.includes('other-gw'), message);
      assert.ok(!message.includes('alone'), message);
      return true;
    });
    const { rows } = await old.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM carrier_account');
    assert.equal(rows[0]!.n, 5, 'no row deleted');
    // Once an operator has resolved the duplicates, the migration applies.
    await old.pool.query(`UPDATE carrier_account SET enabled = false, gateway_account = 'same-gw-retired' WHERE name = 'dup-b'`);
    await old.pool.query(`DELETE FROM carrier_account WHERE name = 'dup-d'`);
    const result = await migrate(old.pool, old.schema);
    assert.ok(result.applied.includes(13));
  } finally {
    await old.close();
  }
});
