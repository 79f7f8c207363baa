/**
 * The carrier_account trigger (migration 000010) and its follower (src/db/accountChanges.ts) on
 * the real PostgreSQL: what announces a change, that a schema hears only its own, and that a lost
 * LISTEN connection comes back and reports what it may have missed.
 *
 * PostgreSQL delivers one connection's notifications in commit order, so a change that must not be
 * announced is followed by one that must: once the second arrives, the first would have arrived.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/index.js';
import { followAccountChanges, type AccountChanges } from '../../src/db/accountChanges.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { waitFor } from '../../testkit/seed.js';
import { captureLogs } from '../../testkit/logs.js';

let mine: TestDb;
let other: TestDb;
let follower: AccountChanges;
const heard: string[] = [];
const config = loadConfig();
const applicationName = (): string => `account-changes-test(${mine.schema})`.slice(0, 63);

before(async () => {
  [mine, other] = await Promise.all([createTestDb('account-changes'), createTestDb('account-changes-other')]);
  follower = followAccountChanges({
    url: config.DATABASE_URL,
    schema: mine.schema,
    applicationName: applicationName(),
    onChange: (reason) => heard.push(reason),
    logger: captureLogs('silent').logger,
    backoffMs: 50,
  });
  await follower.listening;
});
after(async () => {
  await follower.stop();
  await Promise.all([mine.close(), other.close()]);
});

let counter = 0;
const insertAccount = async (db: TestDb): Promise<string> => {
  counter += 1;
  const { rows } = await db.pool.query<{ id: string }>(`INSERT INTO carrier_account (name, gateway_account) VALUES ($1, $1) RETURNING id::text`, [
    `notify-${counter}`,
  ]);
  return rows[0]!.id;
};

/** Waits until `count` changes were heard, then returns them and starts counting afresh. */
async function heardUntil(count: number): Promise<string[]> {
  await waitFor(`${count} account change(s) heard`, async () => heard.length >= count, 10_000, 20);
  return heard.splice(0);
}

test('account changes: inserts, enabled flips and deletes are announced, to their own schema only', async () => {
  // Another schema's account, then one of ours: only ours is heard.
  await insertAccount(other);
  const id = await insertAccount(mine);
  assert.deepEqual(await heardUntil(1), ['notified']);

  // A change to another column decides nothing about schedulers: not announced.
  await mine.pool.query('UPDATE carrier_account SET inflight_limit = 7 WHERE id = $1::bigint', [id]);
  await mine.pool.query('UPDATE carrier_account SET enabled = false WHERE id = $1::bigint', [id]);
  assert.deepEqual(await heardUntil(1), ['notified']);

  // A bulk import: one statement of many rows, and several statements of one transaction, are one announcement each.
  await mine.pool.query(`INSERT INTO carrier_account (name, gateway_account) SELECT 'bulk-' || n, 'bulk-gw-' || n FROM generate_series(1, 50) AS n`);
  const client = await mine.pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(`INSERT INTO carrier_account (name, gateway_account) VALUES ('tx-1', 'tx-gw-1')`);
    await client.query(`INSERT INTO carrier_account (name, gateway_account) VALUES ('tx-2', 'tx-gw-2')`);
    await client.query(`UPDATE carrier_account SET enabled = true WHERE name = 'tx-1'`);
    await client.query('COMMIT');
  } finally {
    client.release();
  }
  await mine.pool.query('DELETE FROM carrier_account WHERE id = $1::bigint', [id]);
  await mine.pool.query(`UPDATE carrier_account SET inflight_limit = 9 WHERE name = 'tx-2'`);
  await insertAccount(mine);
  assert.deepEqual(await heardUntil(4), ['notified', 'notified', 'notified', 'notified'], 'bulk insert, transaction, delete, insert');
});

test('account changes: a lost LISTEN connection is opened again, reports the gap, and hears what follows', async () => {
  const backend = async (): Promise<number | undefined> => {
    const { rows } = await mine.pool.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query ILIKE 'LISTEN%'`, [
      applicationName(),
    ]);
    return rows[0]?.pid;
  };
  const lost = await waitFor('the follower’s backend', backend, 10_000, 20);
  const { rows } = await mine.pool.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [lost]);
  assert.equal(rows[0]?.ok, true);
  // Changes made while nobody listened are not announced: the follower reports the gap instead.
  assert.deepEqual(await heardUntil(1), ['missed']);
  await waitFor(
    'a new backend of the follower',
    async () => {
      const pid = await backend();
      return pid !== undefined && pid !== lost;
    },
    10_000,
    20,
  );
  await insertAccount(mine);
  assert.deepEqual(await heardUntil(1), ['notified']);

  await follower.stop();
  assert.equal(await backend(), undefined, 'stop() closes the connection');
});
