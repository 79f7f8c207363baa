import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createPollingConfig, deletePollingConfig, listPollingConfigs, updatePollingConfig } from '../../src/db/pollingConfigs.js';
import { DomainError } from '../../src/domain/errors.js';
import { mergeIntervals } from '../../src/domain/pollingConfig.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { makeCarrier } from './fixtures.js';

let db: TestDb;
before(async () => {
  db = await createTestDb('configs');
});
after(() => db.close());

test('polling config: merged intervals per type from the highest-priority enabled matching rule', async () => {
  const a = await makeCarrier(db.pool);
  const b = await makeCarrier(db.pool);
  await createPollingConfig(db.pool, { name: 'base', priority: 0, intervalsSec: { card_status: 3600, carddata: 7200, package: 86400 } });
  await createPollingConfig(db.pool, { name: 'a-active', priority: 10, match: { carrierId: a.id, cardStatus: 'active' }, intervalsSec: { card_status: 600 } });
  await createPollingConfig(db.pool, { name: 'a-any', priority: 5, match: { carrierId: a.id }, intervalsSec: { card_status: 1200, realname: 43200 } });
  await createPollingConfig(db.pool, { name: 'off', priority: 100, enabled: false, intervalsSec: { card_status: 1 } });
  const configs = await listPollingConfigs(db.pool);
  assert.equal(configs.length, 4);
  assert.deepEqual(mergeIntervals(configs, { carrierId: a.id, status: 'active' }), { card_status: 600, carddata: 7200, realname: 43200, package: 86400 });
  assert.deepEqual(mergeIntervals(configs, { carrierId: a.id, status: 'suspended' }), { card_status: 1200, carddata: 7200, realname: 43200, package: 86400 });
  assert.deepEqual(mergeIntervals(configs, { carrierId: b.id, status: 'active' }), { card_status: 3600, carddata: 7200, package: 86400 });
  // A type no matching rule sets is not polled.
  assert.deepEqual(mergeIntervals([], { carrierId: b.id, status: 'active' }), {});
});

test('polling config: interval below the minimum, bad match and duplicate name are typed errors', async () => {
  const check = (code: DomainError['code'], field: string) => (error: unknown) => error instanceof DomainError && error.code === code && error.field === field;
  await assert.rejects(createPollingConfig(db.pool, { name: 'fast', intervalsSec: { card_status: 0 } }), check('invalid', 'intervalsSec.card_status'));
  await assert.rejects(
    createPollingConfig(db.pool, { name: 'fast2', intervalsSec: { carddata: 30 } }, { minIntervalSec: 60 }),
    check('invalid', 'intervalsSec.carddata'),
  );
  await assert.rejects(createPollingConfig(db.pool, { name: 'typo', intervalsSec: { cardstatus: 60 } as never }), check('invalid', 'intervalsSec.cardstatus'));
  await assert.rejects(
    createPollingConfig(db.pool, { name: 'm', match: { cardStatus: 'gone' } as never, intervalsSec: {} }),
    check('invalid', 'match.cardStatus'),
  );
  await createPollingConfig(db.pool, { name: 'same', intervalsSec: { package: 60 } });
  await assert.rejects(createPollingConfig(db.pool, { name: 'same', intervalsSec: { package: 60 } }), check('conflict', 'name'));
});

test('polling config: patch replaces the interval set, delete removes', async () => {
  const config = await createPollingConfig(db.pool, { name: 'patchable', intervalsSec: { card_status: 60, carddata: 120 } });
  const patched = await updatePollingConfig(db.pool, config.id, { priority: 3, intervalsSec: { realname: 900 } });
  assert.equal(patched.priority, 3);
  assert.deepEqual(patched.intervalsSec, { realname: 900 });
  await deletePollingConfig(db.pool, config.id);
  await assert.rejects(deletePollingConfig(db.pool, config.id), (error: unknown) => error instanceof DomainError && error.code === 'not_found');
});
