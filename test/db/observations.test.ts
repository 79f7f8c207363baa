import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { insertCards } from '../../src/db/cards.js';
import { insertObservations } from '../../src/db/observations.js';
import { insertExecutions, listExecutions } from '../../src/db/executions.js';
import { normaliseCard } from '../../src/domain/cardInput.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { getCardLatest, listCardObservations } from '../../testkit/dbReads.js';
import { iccid, makeCarrier } from './fixtures.js';

let db: TestDb;
before(async () => {
  db = await createTestDb('observations');
});
after(() => db.close());

test('observations: duplicate collection ids are ignored and older observations never overwrite newer state', async () => {
  const carrier = await makeCarrier(db.pool);
  const [card] = await insertCards(db.pool, [normaliseCard({ iccid: iccid(1), carrierId: carrier.id })]);
  const base = { cardId: card!.id, carrierId: carrier.id };
  const t = (s: number): Date => new Date(Date.UTC(2026, 0, 1, 0, 0, s));
  const first = await insertObservations(db.pool, [
    { ...base, observationId: 'o1', type: 'card_status', observedAt: t(10), payload: { network: 'online' } },
    { ...base, observationId: 'o2', type: 'carddata', observedAt: t(10), payload: { usageKb: 100 } },
    { ...base, observationId: 'o3', type: 'card_status', observedAt: t(20), payload: { network: 'offline' } },
  ]);
  assert.deepEqual(first, { inserted: 3, cardsUpdated: 1 });
  let latest = await getCardLatest(db.pool, card!.id);
  assert.equal(latest.networkStatus, 'offline');
  assert.equal(latest.networkObservedAt?.getTime(), t(20).getTime());
  assert.equal(latest.dataUsageKb, 100);

  // A retry of the same batch plus an out-of-order (older) network observation.
  const second = await insertObservations(db.pool, [
    { ...base, observationId: 'o1', type: 'card_status', observedAt: t(10), payload: { network: 'online' } },
    { ...base, observationId: 'o4', type: 'card_status', observedAt: t(15), payload: { network: 'online' } },
    { ...base, observationId: 'o5', type: 'realname', observedAt: t(5), payload: { realname: 'verified' } },
  ]);
  assert.deepEqual(second, { inserted: 2, cardsUpdated: 1 });
  latest = await getCardLatest(db.pool, card!.id);
  assert.equal(latest.networkStatus, 'offline', 'older observation must not overwrite');
  assert.equal(latest.realnameStatus, 'verified', 'first realname value is applied');
  assert.equal((await listCardObservations(db.pool, card!.id)).length, 5);
});

test('observations: partitions are created ahead and rows land outside them in the default partition', async () => {
  // The migration's function, as storage maintenance calls it (src/db/retention.ts): how many it created.
  const createPartitions = async (): Promise<number> =>
    (await db.pool.query<{ created: number }>('SELECT create_card_observation_partitions($1::date, 2) AS created', [new Date(Date.UTC(2030, 4, 1))])).rows[0]!
      .created;
  assert.equal(await createPartitions(), 2);
  assert.equal(await createPartitions(), 0, 'idempotent');
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM card_observation_default');
  assert.ok(rows[0]!.n >= 1, 'the 2026-01 rows fall outside the created months');
});

test('executions: one row per run, idempotent on (workflowId, runId), listed newest first', async () => {
  const carrier = await makeCarrier(db.pool);
  const [card] = await insertCards(db.pool, [normaliseCard({ iccid: iccid(2), carrierId: carrier.id })]);
  const run = {
    cardId: card!.id,
    carrierId: carrier.id,
    types: ['card_status', 'carddata'] as const,
    outcome: 'success' as const,
    gatewayMs: 120,
    workflowId: `card-${card!.id}`,
  };
  assert.equal(await insertExecutions(db.pool, [{ ...run, types: [...run.types], startedAt: new Date(1000), runId: 'r1' }]), 1);
  assert.equal(
    await insertExecutions(db.pool, [{ ...run, types: [...run.types], startedAt: new Date(1000), runId: 'r1' }]),
    0,
    'a retried write lands nothing',
  );
  assert.equal(await insertExecutions(db.pool, [{ ...run, types: ['realname'], outcome: 'failed', startedAt: new Date(2000), runId: 'r2' }]), 1);
  const executions = await listExecutions(db.pool, card!.id);
  assert.deepEqual(
    executions.map((e) => [e.runId, e.outcome, e.types]),
    [
      ['r2', 'failed', ['realname']],
      ['r1', 'success', ['card_status', 'carddata']],
    ],
  );
});

test('executions: the cards of one batch run get a row each, idempotent per (workflowId, runId, cardId)', async () => {
  const carrier = await makeCarrier(db.pool);
  const cards = await insertCards(
    db.pool,
    [3, 4, 5, 6].map((n) => normaliseCard({ iccid: iccid(n), carrierId: carrier.id })),
  );
  // A cardBatch run records every card it carries under its own workflow and run ids.
  const row = (cardId: string) => ({
    cardId,
    carrierId: carrier.id,
    types: ['card_status' as const],
    outcome: 'success' as const,
    gatewayMs: 10,
    startedAt: new Date(3000),
    workflowId: 'card-batch-7-run.1-0',
    runId: 'batch-run',
  });
  const [a, b, c, d] = cards.map((card) => card.id);
  assert.equal(await insertExecutions(db.pool, [row(a!)]), 1);
  assert.equal(await insertExecutions(db.pool, [row(b!)]), 1, 'a second card of the run is a row of its own');
  assert.equal(await insertExecutions(db.pool, [row(b!)]), 0, "a retried write finds its own card's row");
  // The async ingest's batch insert: new cards of the run land, a repeated one does not.
  assert.equal(await insertExecutions(db.pool, [row(c!), row(d!), row(a!)]), 2);
  for (const cardId of [a, b, c, d]) {
    const executions = await listExecutions(db.pool, cardId!);
    assert.deepEqual(
      executions.map((e) => [e.cardId, e.workflowId, e.runId]),
      [[cardId, 'card-batch-7-run.1-0', 'batch-run']],
    );
  }
});
