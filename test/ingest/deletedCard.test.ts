/**
 * A card deleted between its run's preparation and its record (docs/design.md, 'PostgreSQL and
 * records'): the record's rows reference the card, so its write fails with a foreign-key violation
 * (23503) that no retry can cure. Sync ingest ends that record as done and logs it; a write that
 * fails while the card still exists is still thrown, so the run retries it without limit.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createIngestActivities } from '../../src/activities/ingest.js';
import type { PriorityTransitions } from '../../src/app/ports.js';
import { deleteCard } from '../../src/db/cards.js';
import { createTestDb } from '../../testkit/db.js';
import { makeCard, makeRecord } from './fixtures.js';
import { makeCarrier } from '../db/fixtures.js';

const noPriority: PriorityTransitions = { executionFinished: async () => undefined };

async function executionRows(pool: import('pg').Pool, runId: string): Promise<number> {
  const { rows } = await pool.query<{ n: string }>('SELECT count(*)::text AS n FROM card_execution WHERE run_id = $1', [runId]);
  return Number(rows[0]?.n ?? 0);
}

test('recordExecution and enqueueRecord: the record of a card deleted after its run prepared ends as done, logged', async () => {
  const db = await createTestDb('deleted-card');
  try {
    const lines: string[] = [];
    const activities = createIngestActivities({ pool: db.pool, priority: noPriority, log: (line) => lines.push(line) });
    const at = Date.now() - 10_000;
    const card = await makeCard(db.pool);
    // Prepared while the card existed; DELETE /v1/cards/:id lands before the record.
    const success = makeRecord(card, at, [{ type: 'card_status', outcome: 'success' }]);
    const failure = makeRecord(card, at + 1, [{ type: 'carddata', outcome: 'failure', failBefore: 99 }]);
    assert.ok(await deleteCard(db.pool, card.cardId));

    // Without alerts (no transaction) and with an alert to open (a transaction): both end.
    assert.deepEqual(await activities.recordExecution(success), { alertsOpened: 0, alertsRecovered: 0 });
    assert.deepEqual(await activities.recordExecution(failure), { alertsOpened: 0, alertsRecovered: 0 });
    // Async ingest without a stream (or with a full one) writes it the same way.
    assert.equal(await activities.enqueueRecord(makeRecord(card, at + 2, [{ type: 'card_status', outcome: 'success' }])), 'written');
    assert.equal(await executionRows(db.pool, success.runId), 0, 'nothing written for the deleted card');
    assert.equal(lines.length, 3, `one line per dropped record: ${JSON.stringify(lines)}`);
    assert.match(lines[0]!, new RegExp(`card ${card.cardId}.*deleted`));
  } finally {
    await db.close();
  }
});

test('recordExecution: a foreign-key violation while the card exists is still thrown (the run retries it)', async () => {
  const db = await createTestDb('deleted-card-not');
  try {
    const lines: string[] = [];
    const activities = createIngestActivities({ pool: db.pool, priority: noPriority, log: (line) => lines.push(line) });
    const card = await makeCard(db.pool);
    // The execution row's insert fails with 23503 though the card is there (a reference other than
    // the card's, or the card's row not yet visible): nothing tells the write it can never land.
    const query = db.pool.query.bind(db.pool) as (text: unknown, values?: unknown) => Promise<unknown>;
    (db.pool as unknown as { query: typeof query }).query = async (text, values) => {
      if (typeof text === 'string' && text.includes('INSERT INTO card_execution'))
        throw Object.assign(new Error('injected: insert on table "card_execution" violates a foreign key constraint'), { code: '23503' });
      return query(text, values);
    };
    const record = makeRecord(card, Date.now() - 5_000, [{ type: 'card_status', outcome: 'success' }]);
    await assert.rejects(activities.recordExecution(record), (error: unknown) => (error as { code?: string }).code === '23503');
    await assert.rejects(activities.enqueueRecord(record), (error: unknown) => (error as { code?: string }).code === '23503');
    assert.deepEqual(lines, [], 'nothing dropped');
  } finally {
    await db.close();
  }
});

test('recordExecution and enqueueRecord: a record under an account deleted since (its card moved on) keeps what it learned, without its alerts', async () => {
  const db = await createTestDb('deleted-account');
  try {
    const lines: string[] = [];
    const activities = createIngestActivities({ pool: db.pool, priority: noPriority, log: (line) => lines.push(line) });
    const at = Date.now() - 10_000;
    const card = await makeCard(db.pool);
    // Prepared under its account; then the card moved to another account and the old one was deleted.
    const failure = makeRecord(card, at, [{ type: 'carddata', outcome: 'failure', failBefore: 99 }]);
    const success = makeRecord(card, at + 1, [{ type: 'card_status', outcome: 'success', payload: { network: 'online' } }]);
    const other = await makeCarrier(db.pool, `ingest-moved-${card.cardId}`);
    await db.pool.query('UPDATE iot_card SET carrier_id = $2 WHERE id = $1', [card.cardId, other.id]);
    await db.pool.query('DELETE FROM carrier_account WHERE id = $1', [card.carrierId]);

    // The failure would open an alert under the deleted account (card_alert references it): no
    // retry can land that, but the execution row and what was observed still can.
    assert.deepEqual(await activities.recordExecution(failure), { alertsOpened: 0, alertsRecovered: 0 });
    assert.equal(await activities.enqueueRecord(success), 'written');
    assert.equal(await executionRows(db.pool, failure.runId), 1, 'the failed run recorded');
    assert.equal(await executionRows(db.pool, success.runId), 1, 'the successful run recorded');
    const { rows } = await db.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM polling_failure_alert WHERE card_id = $1', [card.cardId]);
    assert.equal(Number(rows[0]?.n), 0, 'no alert under a deleted account');
    assert.equal(lines.length, 1, `one line for the record written without its alerts: ${JSON.stringify(lines)}`);
    assert.match(lines[0]!, new RegExp(`account ${card.carrierId}.*deleted`));
  } finally {
    await db.close();
  }
});
