/**
 * Two ingest writes of one card's records at the same time (two batches of the async ingest, or a
 * batch and a sync write): a failure that opens the card's alert and a newer success that recovers
 * it must not miss each other under READ COMMITTED. A write hook holds the first write's
 * transaction open until the second has committed or is seen waiting for a lock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { loadConfig } from '../../src/config/index.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { writeRecords } from '../../src/ingest/writer.js';
import type { IngestRecord } from '../../src/ingest/record.js';
import type { PriorityTransitions } from '../../src/app/ports.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { waitFor } from '../../testkit/seed.js';
import { makeCard, makeRecord } from './fixtures.js';

const noPriority: PriorityTransitions = { executionFinished: async () => undefined };

/**
 * Writes `held` with a hook that keeps its transaction open, then `racing` on a pool of its own
 * once `held` has written its rows; `held` commits when `racing` has settled or waits on a lock.
 */
async function race(db: TestDb, held: readonly IngestRecord[], racing: readonly IngestRecord[]): Promise<void> {
  const applicationName = `alert-race-${randomUUID().slice(0, 8)}`;
  const other: Pool = createPool({ url: loadConfig().DATABASE_URL, schema: db.schema, max: 2, applicationName });
  try {
    let rowsWritten: () => void = () => undefined;
    const written = new Promise<void>((resolve) => (rowsWritten = resolve));
    let racingSettled = false;
    const racingWaits = async (): Promise<boolean> => {
      const { rows } = await db.pool.query<{ n: string }>(
        "SELECT count(*)::text AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
        [applicationName],
      );
      return Number(rows[0]?.n) > 0;
    };
    const first = writeRecords(
      {
        pool: db.pool,
        priority: noPriority,
        beforeCommit: async () => {
          rowsWritten();
          await waitFor('the racing write to commit or to wait for this one', async () => racingSettled || (await racingWaits()), 20_000, 20);
        },
      },
      held,
    );
    await written;
    const second = writeRecords({ pool: other, priority: noPriority }, racing).finally(() => (racingSettled = true));
    await Promise.all([first, second]);
  } finally {
    await other.end();
  }
}

const openAlerts = async (db: TestDb, cardId: string): Promise<number> =>
  (await db.pool.query("SELECT 1 FROM polling_failure_alert WHERE card_id = $1::bigint AND status = 'open'", [cardId])).rowCount ?? 0;

test('alerts: a success written while the batch opening the alert is still open recovers it', async () => {
  const db = await createTestDb('alert-race-a');
  try {
    const card = await makeCard(db.pool);
    const bystander = await makeCard(db.pool, card.carrierId);
    const t0 = Date.now() - 60_000;
    // The tenth failure in a row opens the alert (threshold 3), in a batch with another card's record.
    const failing = makeRecord(card, t0, [{ type: 'card_status', outcome: 'failure', failBefore: 9 }]);
    const recovering = makeRecord(card, t0 + 5000, [{ type: 'card_status', outcome: 'success', failBefore: 10 }]);
    await race(db, [failing, makeRecord(bystander, t0, [{ type: 'card_status', outcome: 'success' }])], [recovering]);
    assert.equal(await openAlerts(db, card.cardId), 0, 'the card recovered after its failure: no alert left open');
  } finally {
    await db.close();
  }
});

test('alerts: a late failure written while the batch with the newer success is still open opens nothing', async () => {
  const db = await createTestDb('alert-race-b');
  try {
    const card = await makeCard(db.pool);
    const bystander = await makeCard(db.pool, card.carrierId);
    const t0 = Date.now() - 60_000;
    const failing = makeRecord(card, t0, [{ type: 'card_status', outcome: 'failure', failBefore: 9 }]);
    const recovering = makeRecord(card, t0 + 5000, [{ type: 'card_status', outcome: 'success', failBefore: 10 }]);
    await race(db, [recovering, makeRecord(bystander, t0, [{ type: 'card_status', outcome: 'success' }])], [failing]);
    assert.equal(await openAlerts(db, card.cardId), 0, 'the newer success supersedes the late failure: no alert left open');
  } finally {
    await db.close();
  }
});
