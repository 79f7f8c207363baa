/**
 * The async-ingest stream's length cap: every entry in it is a record not yet in PostgreSQL, so
 * the cap refuses hand-offs (the card worker then writes the record itself) and never trims.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createIngestActivities } from '../../src/activities/ingest.js';
import { IngestStream, IngestStreamFull } from '../../src/ingest/stream.js';
import type { PriorityTransitions } from '../../src/app/ports.js';
import { createTestDb } from '../../testkit/db.js';
import { createTestRedis } from '../../testkit/redis.js';
import { makeCard, makeRecord } from './fixtures.js';

const noPriority: PriorityTransitions = { executionFinished: async () => undefined };

test('ingest stream: a full stream refuses the hand-off and keeps every entry; the record is written by the card worker instead', async () => {
  const db = await createTestDb('stream-cap');
  const redis = await createTestRedis('stream-cap');
  try {
    const stream = new IngestStream(redis.redis, redis.namespace, { maxRecords: 3 });
    await stream.ensureGroup();
    const card = await makeCard(db.pool);
    const at = Date.now() - 10_000;
    const pending = [0, 1, 2].map((i) => makeRecord(card, at + i * 1000, [{ type: 'card_status', outcome: 'success' }]));
    const ids: string[] = [];
    for (const record of pending) ids.push(await stream.enqueue(JSON.stringify(record)));
    await assert.rejects(stream.enqueue('{}'), (error: unknown) => error instanceof IngestStreamFull && error.records === 3 && error.maxRecords === 3);
    // Nothing handed over earlier was dropped to make room.
    assert.deepEqual(
      (await redis.redis.xrange(stream.keys.stream, '-', '+')).map(([id]) => id),
      ids,
    );

    // The card worker's hand-off of a fourth record: written to PostgreSQL at once, the stream untouched.
    const activities = createIngestActivities({ pool: db.pool, priority: noPriority, stream });
    const fourth = makeRecord(card, at + 5000, [{ type: 'card_status', outcome: 'success' }]);
    assert.equal(await activities.enqueueRecord(fourth), 'written');
    const { rows } = await db.pool.query<{ run_id: string }>('SELECT run_id FROM card_execution WHERE card_id = $1::bigint', [card.cardId]);
    assert.deepEqual(
      rows.map((row) => row.run_id),
      [fourth.runId],
    );
    assert.equal((await stream.backlog()).records, 3);

    // A committed batch frees its room: hand-offs go to the stream again.
    await stream.ack([ids[0]!], 1);
    const fifth = makeRecord(card, at + 6000, [{ type: 'card_status', outcome: 'success' }]);
    assert.match(await activities.enqueueRecord(fifth), /^\d+-\d+$/);
    assert.equal((await stream.backlog()).records, 3);
  } finally {
    await redis.close();
    await db.close();
  }
});
