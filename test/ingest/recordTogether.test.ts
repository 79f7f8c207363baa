/**
 * Sync ingest's records handed over in one turn (a batch run's record flush) are written in one
 * transaction; one record that cannot be written fails alone, the others are written all the same.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createIngestActivities } from '../../src/activities/ingest.js';
import type { PriorityTransitions } from '../../src/app/ports.js';
import { createTestDb } from '../../testkit/db.js';
import { makeCard, makeRecord } from './fixtures.js';
import type { CheckType } from '../../src/workflow-safe/checkTypes.js';

const noPriority: PriorityTransitions = { executionFinished: async () => undefined };

/** The transaction that wrote each run's execution row (xmin), by run id. */
async function writers(pool: import('pg').Pool, runIds: readonly string[]): Promise<Map<string, string>> {
  const { rows } = await pool.query<{ run_id: string; xmin: string }>('SELECT run_id, xmin::text FROM card_execution WHERE run_id = ANY($1::text[])', [runIds]);
  return new Map(rows.map((row) => [row.run_id, row.xmin]));
}

test('recordExecution: records handed over in one turn share one transaction; a record that cannot be written fails alone', async () => {
  const db = await createTestDb('record-together');
  try {
    const activities = createIngestActivities({ pool: db.pool, priority: noPriority, log: () => undefined });
    const at = Date.now() - 10_000;
    const cards = [await makeCard(db.pool), await makeCard(db.pool), await makeCard(db.pool)];
    const together = cards.map((card, i) => makeRecord(card, at + i, [{ type: 'card_status', outcome: 'success' }]));
    const counts = await Promise.all(together.map((record) => activities.recordExecution(record)));
    assert.deepEqual(
      counts,
      [0, 1, 2].map(() => ({ alertsOpened: 0, alertsRecovered: 0 })),
    );
    const shared = await writers(
      db.pool,
      together.map((r) => r.runId),
    );
    assert.equal(shared.size, 3, 'every record of the turn written');
    assert.equal(new Set(shared.values()).size, 1, `one transaction for the turn's records: ${JSON.stringify([...shared])}`);

    // Per-record alert counts come back to each caller: a failure at the threshold opens an alert.
    const failing = makeRecord(cards[0]!, at + 100, [{ type: 'card_status', outcome: 'failure', failBefore: 99 }]);
    const succeeding = makeRecord(cards[1]!, at + 100, [{ type: 'card_status', outcome: 'success' }]);
    const [opened, plain] = await Promise.all([activities.recordExecution(failing), activities.recordExecution(succeeding)]);
    assert.equal(opened.alertsOpened, 1, 'the failing record opened its alert');
    assert.deepEqual(plain, { alertsOpened: 0, alertsRecovered: 0 });

    // A record that cannot be written (a type no check has, refused as invalid data, though its card
    // and account exist) and one of a card deleted since its run prepared
    // (card_execution's foreign key): the turn's transaction fails, each record is then written on
    // its own; only the first fails, the deleted card's ends as done with nothing written
    // (docs/design.md, 'PostgreSQL and records').
    const refused = makeRecord(cards[0]!, at + 200, [{ type: 'card_status', outcome: 'failure', failBefore: 99 }]);
    // A type no check has: only a record built by hand carries one.
    const orphan = { ...refused, plan: { ...refused.plan, types: ['no_such_type' as CheckType] } };
    const ghost = makeRecord({ cardId: '999999999', carrierId: cards[0]!.carrierId }, at + 200, [{ type: 'card_status', outcome: 'success' }]);
    const good = cards.slice(1).map((card) => makeRecord(card, at + 200, [{ type: 'card_status', outcome: 'success' }]));
    const settled = await Promise.allSettled([orphan, ghost, ...good].map((record) => activities.recordExecution(record)));
    assert.equal(settled[0]!.status, 'rejected');
    assert.match(String((settled[0] as PromiseRejectedResult).reason), /types must be check types/);
    assert.deepEqual(
      settled.slice(1).map((s) => s.status),
      ['fulfilled', 'fulfilled', 'fulfilled'],
    );
    const alone = await writers(
      db.pool,
      [orphan, ghost, ...good].map((r) => r.runId),
    );
    assert.deepEqual([...alone.keys()].sort(), good.map((r) => r.runId).sort(), 'the good records written, the others not');
    assert.equal(new Set(alone.values()).size, 2, 'each good record in a write of its own after the shared one failed');
  } finally {
    await db.close();
  }
});
