/**
 * The async ingest against the real Redis and PostgreSQL: batches across executions, the same
 * rows as sync ingest, redelivery, out-of-order records, retries, dead letters, and the backlog's
 * alert and backpressure on claiming.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { RedisConnection } from '../../src/redis/connection.js';
import type pg from 'pg';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { createTestRedis, type TestRedis } from '../../testkit/redis.js';
import { createStack, stackControlActivities } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { IngestStream } from '../../src/ingest/stream.js';
import { IngestConsumer } from '../../src/ingest/consumer.js';
import { writeRecords, type RecordWriterDeps, type WriteResult } from '../../src/ingest/writer.js';
import type { IngestRecord } from '../../src/ingest/record.js';
import { BacklogMonitor } from '../../src/ingest/monitor.js';
import { createIngestPressure } from '../../src/ingest/pressure.js';
import { listDeadLetters } from '../../testkit/dbReads.js';
import type { PriorityTransitions } from '../../src/app/ports.js';
import { makeCard, makeRecord } from './fixtures.js';
import { makeCarrier } from '../db/fixtures.js';

const noPriority: PriorityTransitions = { executionFinished: async () => undefined };

interface Env {
  readonly db: TestDb;
  readonly redis: TestRedis;
  readonly stream: IngestStream;
  readonly writer: RecordWriterDeps;
  consumer(options?: { write?: (records: readonly IngestRecord[]) => Promise<WriteResult>; reclaimIdleMs?: number; batchSize?: number }): IngestConsumer;
  close(): Promise<void>;
}

async function env(label: string): Promise<Env> {
  const db = await createTestDb(label);
  const redis = await createTestRedis(label);
  const stream = new IngestStream(redis.redis, redis.namespace);
  await stream.ensureGroup();
  const writer = { pool: db.pool, priority: noPriority };
  const consumers: IngestConsumer[] = [];
  return {
    db,
    redis,
    stream,
    writer,
    consumer(options = {}) {
      const consumer = new IngestConsumer({
        stream,
        readConnection: redis.redis.duplicate(),
        writer,
        concurrency: 4,
        batchSize: options.batchSize ?? 100,
        blockMs: 100,
        reclaimIdleMs: options.reclaimIdleMs ?? 30_000,
        log: () => undefined,
        ...(options.write ? { write: options.write } : {}),
      });
      consumers.push(consumer);
      consumer.start();
      return consumer;
    },
    async close() {
      for (const consumer of consumers) await consumer.stop();
      await redis.close();
      await db.close();
    },
  };
}

async function enqueueAll(stream: IngestStream, records: readonly IngestRecord[]): Promise<void> {
  for (const record of records) await stream.enqueue(JSON.stringify(record));
}

const drained = (stream: IngestStream) => waitFor('the stream to drain', async () => (await stream.backlog()).records === 0, 20_000, 50);

/** Everything the ingest writes, in a comparable order (ids and insert times left out). */
async function snapshot(pool: pg.Pool): Promise<Record<string, unknown[]>> {
  const q = async (sql: string): Promise<unknown[]> => (await pool.query<Record<string, unknown>>(sql)).rows;
  return {
    observations: await q(
      `SELECT observation_id, observed_at, card_id::text, carrier_id::text, check_type, payload FROM card_observation ORDER BY observation_id`,
    ),
    executions: await q(
      `SELECT card_id::text, carrier_id::text, started_at, finished_at, types, outcome, gateway_ms, workflow_id, ` +
        `run_id, from_priority, details FROM card_execution ORDER BY run_id`,
    ),
    cards: await q(
      `SELECT id::text, network_status, network_observed_at, realname_status, realname_observed_at, data_usage_kb, data_observed_at FROM iot_card ORDER BY id`,
    ),
    alerts: await q(
      `SELECT card_id::text, check_type, status, fail_count, last_error, opened_at, recovered_at FROM polling_failure_alert ORDER BY opened_at, check_type`,
    ),
  };
}

/** A card's story: online, data, a failure streak that opens an alert, the success that recovers it. */
function story(card: { cardId: string; carrierId: string }, base: number): IngestRecord[] {
  return [
    makeRecord(card, base + 1000, [
      { type: 'card_status', outcome: 'success', payload: { network: 'online' } },
      { type: 'carddata', outcome: 'success', payload: { usageKb: 100 } },
    ]),
    makeRecord(card, base + 2000, [{ type: 'realname', outcome: 'success', payload: { realname: 'verified' } }]),
    makeRecord(card, base + 3000, [{ type: 'card_status', outcome: 'failure', failBefore: 0 }]),
    makeRecord(card, base + 4000, [{ type: 'card_status', outcome: 'failure', failBefore: 1 }]),
    makeRecord(card, base + 5000, [{ type: 'card_status', outcome: 'failure', failBefore: 2 }]),
    makeRecord(card, base + 6000, [
      { type: 'card_status', outcome: 'success', failBefore: 3, payload: { network: 'offline' } },
      { type: 'carddata', outcome: 'success', payload: { usageKb: 250 } },
    ]),
  ];
}

test('async ingest writes the same rows as sync ingest, in batches across executions', async () => {
  const sync = await env('ingest-same-sync');
  const async_ = await env('ingest-same-async');
  try {
    // Fresh schemas: the same ids on both sides.
    const cardsSync = [await makeCard(sync.db.pool), await makeCard(sync.db.pool)];
    const cardsAsync = [await makeCard(async_.db.pool), await makeCard(async_.db.pool)];
    assert.deepEqual(cardsAsync, cardsSync);
    const base = Date.parse('2026-03-01T10:00:00Z');
    // Two cards' executions interleaved, as concurrent executions hand them over.
    const [a, b] = [story(cardsSync[0]!, base), story(cardsSync[1]!, base + 500)];
    const records = a.flatMap((record, i) => [record, b[i]!]);

    for (const record of records) await writeRecords(sync.writer, [record]);

    await enqueueAll(async_.stream, records);
    const batches: number[] = [];
    async_.consumer({
      write: async (batch) => {
        batches.push(batch.length);
        return writeRecords(async_.writer, batch);
      },
    });
    await drained(async_.stream);
    assert.ok(
      batches.some((n) => n > 1),
      `records were written in batches across executions (batch sizes ${batches.join(', ')})`,
    );

    const [expected, actual] = [await snapshot(sync.db.pool), await snapshot(async_.db.pool)];
    assert.equal(actual.executions!.length, records.length);
    assert.equal(actual.observations!.length, 10);
    assert.deepEqual(actual, expected);
    // The story's end: offline, 250 kB, the alert opened by the third failure recovered.
    assert.deepEqual(
      (actual.alerts as { status: string }[]).map((alert) => alert.status),
      ['recovered', 'recovered'],
    );
    assert.deepEqual(
      (actual.cards as { network_status: string; data_usage_kb: string }[]).map((card) => [card.network_status, String(card.data_usage_kb)]),
      [
        ['offline', '250'],
        ['offline', '250'],
      ],
    );
  } finally {
    await sync.close();
    await async_.close();
  }
});

test('a redelivered batch writes nothing twice (consumer died after its commit, before its ack)', async () => {
  const e = await env('ingest-redeliver');
  try {
    const card = await makeCard(e.db.pool);
    const records = story(card, Date.parse('2026-03-02T10:00:00Z'));
    await enqueueAll(e.stream, records);
    // A consumer takes the batch and commits it, then dies before acknowledging.
    const reader = e.redis.redis.duplicate();
    const taken = await e.stream.read(reader, 'died-after-commit', 100, 0);
    reader.disconnect();
    assert.equal(taken.length, records.length);
    await writeRecords(e.writer, records);
    const afterFirst = await snapshot(e.db.pool);
    // And the card worker's hand-off was retried: one record is in the stream twice.
    await e.stream.enqueue(JSON.stringify(records[2]));

    // Another consumer takes the dead one's pending entries over and writes them again.
    const consumer = e.consumer({ reclaimIdleMs: 200 });
    await drained(e.stream);
    assert.deepEqual(await snapshot(e.db.pool), afterFirst);
    const { rows } = await e.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM card_execution');
    assert.equal(rows[0]!.n, records.length);
    const pending = (await e.redis.redis.xpending(e.stream.keys.stream, 'ingest')) as [number, ...unknown[]];
    assert.equal(pending[0], 0, `nothing left pending (consumer ${consumer.name})`);
  } finally {
    await e.close();
  }
});

test('an older observation arriving after a newer one does not roll the card back', async () => {
  const e = await env('ingest-order');
  try {
    const card = await makeCard(e.db.pool);
    const t = Date.parse('2026-03-03T10:00:00Z');
    const newer = makeRecord(card, t + 10_000, [
      { type: 'card_status', outcome: 'success', payload: { network: 'online' } },
      { type: 'realname', outcome: 'success', payload: { realname: 'verified' } },
      { type: 'carddata', outcome: 'success', failBefore: 0, payload: { usageKb: 500 } },
    ]);
    const older = makeRecord(card, t, [
      { type: 'card_status', outcome: 'success', payload: { network: 'offline' } },
      { type: 'realname', outcome: 'success', payload: { realname: 'unverified' } },
      // A failure streak's third failure, superseded by the newer success of the same type.
      { type: 'carddata', outcome: 'failure', failBefore: 2 },
    ]);
    e.consumer();
    await enqueueAll(e.stream, [newer]);
    await drained(e.stream);
    await enqueueAll(e.stream, [older]);
    await drained(e.stream);
    const { rows } = await e.db.pool.query<{ network_status: string; network_observed_at: Date; realname_status: string; data_usage_kb: string }>(
      'SELECT network_status, network_observed_at, realname_status, data_usage_kb::text FROM iot_card WHERE id = $1::bigint',
      [card.cardId],
    );
    assert.deepEqual(rows[0], { network_status: 'online', network_observed_at: new Date(t + 10_000), realname_status: 'verified', data_usage_kb: '500' });
    const observations = await e.db.pool.query('SELECT 1 FROM card_observation WHERE card_id = $1::bigint', [card.cardId]);
    assert.equal(observations.rowCount, 5, 'the older observations are kept as history');
    const alerts = await e.db.pool.query("SELECT 1 FROM polling_failure_alert WHERE card_id = $1::bigint AND status = 'open'", [card.cardId]);
    assert.equal(alerts.rowCount, 0, 'a late failure does not open an alert the newer success already cleared');

    // The other way round: a newer failure opened an alert; a late, older success must not recover it.
    const card2 = await makeCard(e.db.pool, card.carrierId);
    await enqueueAll(e.stream, [makeRecord(card2, t + 20_000, [{ type: 'card_status', outcome: 'failure', failBefore: 2 }])]);
    await drained(e.stream);
    await enqueueAll(e.stream, [makeRecord(card2, t + 5000, [{ type: 'card_status', outcome: 'success', failBefore: 3, payload: { network: 'online' } }])]);
    await drained(e.stream);
    const open = await e.db.pool.query("SELECT 1 FROM polling_failure_alert WHERE card_id = $1::bigint AND status = 'open'", [card2.cardId]);
    assert.equal(open.rowCount, 1);
  } finally {
    await e.close();
  }
});

test('retryable failures retry the whole batch until it commits; an unwritable record is dead-lettered, never dropped', async () => {
  const e = await env('ingest-failures');
  try {
    const card = await makeCard(e.db.pool);
    const t = Date.parse('2026-03-04T10:00:00Z');
    const records = [0, 1, 2].map((i) => makeRecord(card, t + i * 1000, [{ type: 'card_status', outcome: 'success', payload: { network: 'online' } }]));
    await enqueueAll(e.stream, records);
    let failures = 0;
    let backlogWhileFailing = -1;
    e.consumer({
      write: async (batch) => {
        if (failures < 3) {
          failures += 1;
          backlogWhileFailing = (await e.stream.backlog()).records;
          // What pg reports when the server shuts down under a connection.
          throw Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
        }
        return writeRecords(e.writer, batch);
      },
    });
    await drained(e.stream);
    assert.equal(failures, 3);
    assert.equal(backlogWhileFailing, records.length, 'a failing batch stays in the stream');
    const written = await e.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM card_execution');
    assert.equal(written.rows[0]!.n, 3);

    // A record for a card that no longer exists violates a foreign key: it cannot ever be written.
    const gone = makeRecord({ cardId: '987654321', carrierId: card.carrierId }, t + 5000, [
      { type: 'card_status', outcome: 'success', payload: { network: 'offline' } },
    ]);
    const good = [3, 4].map((i) => makeRecord(card, t + i * 1000, [{ type: 'carddata', outcome: 'success', payload: { usageKb: i } }]));
    await enqueueAll(e.stream, [good[0]!, gone, good[1]!]);
    await e.stream.enqueue('{not json');
    await drained(e.stream);
    const after = await e.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM card_execution');
    assert.equal(after.rows[0]!.n, 5, 'the good records of the batch are written');
    const letters = await listDeadLetters(e.db.pool);
    assert.equal(letters.length, 2);
    const fk = letters.find((l) => l.recordId === gone.recordId);
    assert.ok(fk, 'the unwritable record is a dead letter');
    assert.equal(fk.errorCode, '23503');
    assert.equal(fk.cardId, '987654321');
    assert.match(fk.reason, /foreign key/);
    assert.ok(letters.some((l) => l.recordId.startsWith('stream:') && /unreadable/.test(l.reason)));
  } finally {
    await e.close();
  }
});

test('a record under an account deleted since (its card moved on) is written without its alerts, not dead-lettered', async () => {
  const e = await env('ingest-deleted-account');
  try {
    const card = await makeCard(e.db.pool);
    const t = Date.now() - 10_000;
    // Prepared under its account; then the card moved to another account and the old one was
    // deleted. The failure would open an alert under the deleted account: no retry lands that.
    const failure = makeRecord(card, t, [{ type: 'carddata', outcome: 'failure', failBefore: 99 }]);
    const success = makeRecord(card, t + 1000, [{ type: 'card_status', outcome: 'success', payload: { network: 'online' } }]);
    const other = await makeCarrier(e.db.pool, `ingest-moved-${card.cardId}`);
    await e.db.pool.query('UPDATE iot_card SET carrier_id = $2 WHERE id = $1', [card.cardId, other.id]);
    await e.db.pool.query('DELETE FROM carrier_account WHERE id = $1', [card.carrierId]);
    await enqueueAll(e.stream, [failure, success]);
    e.consumer();
    await drained(e.stream);
    const { rows } = await e.db.pool.query<{ run_id: string }>('SELECT run_id FROM card_execution WHERE card_id = $1 ORDER BY run_id', [card.cardId]);
    assert.deepEqual(rows.map((row) => row.run_id).sort(), [failure.runId, success.runId].sort(), 'both runs recorded');
    const observed = await e.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM card_observation WHERE card_id = $1', [card.cardId]);
    assert.equal(observed.rows[0]!.n, 1, 'the success observed the card');
    const alerts = await e.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM polling_failure_alert WHERE card_id = $1', [card.cardId]);
    assert.equal(alerts.rows[0]!.n, 0, 'no alert under a deleted account');
    assert.deepEqual(await listDeadLetters(e.db.pool), [], 'nothing dead-lettered');
  } finally {
    await e.close();
  }
});

test('a backlog over its threshold opens the ingest_backlog alert and tightens claiming; draining resolves and relaxes both', async () => {
  const stack = await createStack('ingest-backpressure');
  try {
    const account = await seedAccount(stack, {
      name: 'bp1',
      qps: { status: 100 },
      typeGroups: { card_status: 'status' },
      cards: 30,
      intervalsSec: { card_status: 60 },
    });
    const redis: RedisConnection = stack.deps.redis;
    const stream = new IngestStream(redis, stack.redis.namespace);
    await stream.ensureGroup();
    const thresholds = { records: 10, maxAgeMs: 600_000 };
    const pressure = createIngestPressure(stream, thresholds, { cacheMs: 0 });
    const control = stackControlActivities(stack, { ingestPressure: pressure });
    const monitor = new BacklogMonitor({ stream, redis, pool: stack.deps.pool, thresholds, owner: 'test-monitor' });
    const card = { cardId: account.cards[0]!.id, carrierId: account.carrier.id };
    // Every card due now (a new card's first due is jittered over a tenth of its interval).
    const dueAt = Date.now() - 1;
    await stack.deps.store.upsertMany(account.cards.map((c) => ({ carrierId: account.carrier.id, cardId: c.id, dues: { card_status: dueAt } })));

    // 40 records waiting (4× the threshold): the account may keep 10 / (2 × 4) = 1 card in flight.
    const t = Date.now();
    await enqueueAll(
      stream,
      Array.from({ length: 40 }, (_, i) => makeRecord(card, t - 40_000 + i * 1000, [{ type: 'carddata', outcome: 'success', payload: { usageKb: i } }])),
    );
    assert.equal(await monitor.tick(), 'open');
    const { rows: open } = await stack.db.pool.query<{ carrier_id: string; status: string; alert_count: number }>(
      "SELECT carrier_id::text, status, alert_count FROM carrier_alert WHERE kind = 'ingest_backlog'",
    );
    assert.deepEqual(open, [{ carrier_id: account.carrier.id, status: 'open', alert_count: 40 }]);
    assert.equal((await pressure.state()).tightened, true);
    assert.equal(await pressure.inflightLimit(10), 1);
    const round = (n: number) =>
      control.claimRound({
        carrierId: account.carrier.id,
        tokenPrefix: `bp.${n}`,
        refreshConfig: false,
        adaptiveLimit: 10,
        cardRuns: { taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX, claimedBy: 'test' },
      });
    const tight = await round(1);
    assert.equal(tight.kind, 'claimed');
    assert.equal(tight.kind === 'claimed' && tight.claimed.length, 1, 'claiming tightened to one card in flight');

    // The ingest catches up: the alert resolves and the account claims up to its limit again.
    const db = { pool: stack.deps.pool, priority: noPriority };
    const consumer = new IngestConsumer({
      stream,
      readConnection: redis.duplicate(),
      writer: db,
      concurrency: 2,
      batchSize: 50,
      blockMs: 100,
      log: () => undefined,
    });
    consumer.start();
    await drained(stream);
    await consumer.stop();
    assert.equal(await monitor.tick(), 'clear');
    const { rows: resolved } = await stack.db.pool.query<{ status: string; resolved: boolean }>(
      "SELECT status, resolved_at >= opened_at AS resolved FROM carrier_alert WHERE kind = 'ingest_backlog'",
    );
    assert.deepEqual(resolved, [{ status: 'resolved', resolved: true }]);
    assert.equal((await pressure.state()).tightened, false);
    const relaxed = await round(2);
    assert.equal(relaxed.kind === 'claimed' && relaxed.claimed.length, 9, 'back to the limit of 10 (one still in flight)');
  } finally {
    await stack.close();
  }
});
