import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { insertCards } from '../../src/db/cards.js';
import { insertObservations } from '../../src/db/observations.js';
import { maintainStorage } from '../../src/db/retention.js';
import { normaliseCard } from '../../src/domain/cardInput.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { iccid, makeCarrier } from './fixtures.js';

let db: TestDb;
before(async () => {
  db = await createTestDb('retention');
});
after(() => db.close());

const at = (iso: string): Date => new Date(iso);

test(
  'storage maintenance: creates coming months (moving rows the default partition held), drops months past ' +
    'retention, deletes old execution rows; idempotent',
  async () => {
    const carrier = await makeCarrier(db.pool);
    const [card] = await insertCards(db.pool, [normaliseCard({ iccid: iccid(1), carrierId: carrier.id })]);
    const base = { cardId: card!.id, carrierId: carrier.id, type: 'card_status' as const, payload: { network: 'online' } };
    // The migration created this month and the next two (real clock); "now" below is years later.
    const { rows: initial } = await db.pool.query<{ name: string }>(
      'SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = ' +
        "'card_observation'::regclass AND c.relname <> 'card_observation_default' ORDER BY 1",
    );
    assert.equal(initial.length, 3);
    const oldMonth = initial[0]!.name.slice(-6);
    await insertObservations(db.pool, [
      { ...base, observationId: 'old', observedAt: at(`${oldMonth.slice(0, 4)}-${oldMonth.slice(4)}-05T00:00:00Z`) },
      { ...base, observationId: 'may', observedAt: at('2030-05-10T00:00:00Z') },
      { ...base, observationId: 'june', observedAt: at('2030-06-20T00:00:00Z') },
      { ...base, observationId: 'ancient', observedAt: at('2020-01-01T00:00:00Z') },
    ]);
    for (const startedAt of ['2020-02-01T00:00:00Z', '2021-03-01T00:00:00Z', '2030-05-01T00:00:00Z']) {
      await db.pool.query(
        'INSERT INTO card_execution (card_id, carrier_id, started_at, types, outcome, workflow_id, run_id) VALUES ($1, ' +
          "$2, $3, '{card_status}', 'success', 'w', $4)",
        [card!.id, carrier.id, startedAt, `run-${startedAt}`],
      );
    }

    const now = at('2030-06-15T12:00:00Z');
    const first = await maintainStorage(db.pool, { keepMonths: 3, monthsAhead: 2, deleteBatch: 1 }, now);
    assert.deepEqual(first.partitionsCreated, ['card_observation_203006', 'card_observation_203007']);
    assert.equal(first.rowsMovedFromDefault, 1, 'the June row waited in the default partition');
    assert.deepEqual(
      first.partitionsDropped,
      initial.map((row) => row.name),
    );
    assert.equal(first.defaultRowsDeleted, 1, 'the 2020 row in the default partition is past retention');
    assert.equal(first.executionsDeleted, 2);
    assert.equal(first.cutoff, '2030-04-01T00:00:00.000Z');

    const { rows } = await db.pool.query<{ id: string; part: string }>(
      'SELECT observation_id AS id, tableoid::regclass::text AS part FROM card_observation ORDER BY observed_at',
    );
    assert.deepEqual(rows, [
      { id: 'may', part: 'card_observation_default' },
      { id: 'june', part: 'card_observation_203006' },
    ]);
    const { rows: executions } = await db.pool.query<{ started: Date }>('SELECT started_at AS started FROM card_execution');
    assert.deepEqual(
      executions.map((row) => row.started.toISOString()),
      ['2030-05-01T00:00:00.000Z'],
    );

    const second = await maintainStorage(db.pool, { keepMonths: 3, monthsAhead: 2 }, now);
    assert.deepEqual(
      [second.partitionsCreated, second.partitionsDropped, second.rowsMovedFromDefault, second.defaultRowsDeleted, second.executionsDeleted],
      [[], [], 0, 0, 0],
    );
    // Rows of the new month go to its partition, not the default.
    await insertObservations(db.pool, [{ ...base, observationId: 'july', observedAt: at('2030-07-02T00:00:00Z') }]);
    const { rows: july } = await db.pool.query<{ part: string }>("SELECT tableoid::regclass::text AS part FROM card_observation WHERE observation_id = 'july'");
    assert.equal(july[0]?.part, 'card_observation_203007');
  },
);

test('storage maintenance: the audit trail, finished priority items, closed alerts, dead letters, learned changes and applied events past retention go; open and pending ones stay', async () => {
  const carrier = await makeCarrier(db.pool);
  const [card] = await insertCards(db.pool, [normaliseCard({ iccid: iccid(2), carrierId: carrier.id })]);
  const old = '2020-01-10T00:00:00Z';
  const recent = '2030-05-10T00:00:00Z';
  for (const when of [old, recent]) {
    await db.pool.query(
      "INSERT INTO audit_log (entity_type, entity_id, action, actor, source, occurred_at) VALUES ('iot_card', $1, 'test', 'test', 'test', $2)",
      [card!.id, when],
    );
    await db.pool.query(
      `INSERT INTO polling_priority_item (card_id, status, types, first_actor, first_source, last_actor, last_source, last_triggered_at, finished_at, result)
       VALUES ($1, 'completed', '{card_status}', 't', 't', 't', 't', $2, $2, 'success')`,
      [card!.id, when],
    );
    await db.pool.query(
      "INSERT INTO polling_failure_alert (card_id, carrier_id, check_type, status, fail_count, opened_at, recovered_at) VALUES ($1, $2, 'card_status', 'recovered', 3, $3, $3)",
      [card!.id, carrier.id, when],
    );
    await db.pool.query(
      "INSERT INTO carrier_alert (carrier_id, kind, status, alert_count, threshold, window_ms, opened_at, resolved_at) VALUES ($1, 'failure_burst', 'resolved', 5, 3, 60000, $2, $2)",
      [carrier.id, when],
    );
    await db.pool.query("INSERT INTO ingest_dead_letter (record_id, record, reason, failed_at) VALUES ($1, '{}', 'test', $2)", [`dead-${when}`, when]);
    await db.pool.query("INSERT INTO card_change (card_id, carrier_id, check_type, changed_at, learned_at) VALUES ($1, $2, 'card_status', $3, $3)", [
      card!.id,
      carrier.id,
      when,
    ]);
    await db.pool.query(
      `INSERT INTO carrier_event (carrier_id, event_id, check_type, iccid, observed_at, observation, received_at, status)
       VALUES ($1, $2, 'card_status', 'x', $3, '{}', $3, 'applied')`,
      [carrier.id, `applied-${when}`, when],
    );
  }
  // Applied events have a clock of their own (eventDays): five days old stays, 36 days old goes.
  await db.pool.query(
    `INSERT INTO carrier_event (carrier_id, event_id, check_type, iccid, observed_at, observation, received_at, status)
     VALUES ($1, 'applied-5-days', 'card_status', 'x', $2, '{}', $2, 'applied')`,
    [carrier.id, '2030-06-10T12:00:00Z'],
  );
  // A pending event stays however old: it is applied first.
  await db.pool.query(
    `INSERT INTO carrier_event (carrier_id, event_id, check_type, iccid, observed_at, observation, received_at) VALUES ($1, 'pending-old', 'card_status', 'x', $2, '{}', $2)`,
    [carrier.id, old],
  );
  // Open and pending ones stay, however old.
  await db.pool.query(
    `INSERT INTO polling_priority_item (card_id, status, types, first_actor, first_source, last_actor, last_source, last_triggered_at, created_at)
     VALUES ($1, 'pending', '{card_status}', 't', 't', 't', 't', $2, $2)`,
    [card!.id, old],
  );
  await db.pool.query(
    "INSERT INTO polling_failure_alert (card_id, carrier_id, check_type, status, fail_count, opened_at) VALUES ($1, $2, 'carddata', 'open', 3, $3)",
    [card!.id, carrier.id, old],
  );

  const result = await maintainStorage(db.pool, { keepMonths: 3, monthsAhead: 2, deleteBatch: 1, eventDays: 30 }, at('2030-06-15T12:00:00Z'));
  assert.deepEqual(result.rowsDeleted, {
    audit_log: 1,
    polling_priority_item: 1,
    polling_failure_alert: 1,
    carrier_alert: 1,
    ingest_dead_letter: 1,
    card_change: 1,
    carrier_event: 2,
  });
  const left = async (sql: string): Promise<string[]> => (await db.pool.query<{ v: string }>(sql)).rows.map((row) => row.v);
  assert.deepEqual(await left('SELECT status AS v FROM polling_priority_item ORDER BY id'), ['completed', 'pending']);
  assert.deepEqual(await left('SELECT status AS v FROM polling_failure_alert ORDER BY id'), ['recovered', 'open']);
  assert.deepEqual(await left("SELECT to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY') AS v FROM audit_log"), ['2030']);
  assert.deepEqual(await left('SELECT record_id AS v FROM ingest_dead_letter'), [`dead-${recent}`]);
  assert.deepEqual(await left('SELECT status AS v FROM carrier_alert'), ['resolved']);
  assert.deepEqual(await left("SELECT to_char(learned_at AT TIME ZONE 'UTC', 'YYYY') AS v FROM card_change"), ['2030']);
  assert.deepEqual(await left('SELECT event_id AS v FROM carrier_event ORDER BY id'), ['applied-5-days', 'pending-old']);
});
