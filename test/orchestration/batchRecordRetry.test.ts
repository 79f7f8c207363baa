/**
 * Batch shape, a card's record failing inside a bookkeeping flush while the other cards' land
 * (issue 46, item 1): the card's record is tried again on its own, without limit, as `cardCheck`
 * does, and lands once PostgreSQL takes it — its execution row is written by the same run. Before,
 * the card failed in its batch after its 3 tries in the flush, and what its check learned was lost
 * (Redis had already moved its due time on: the card is not checked again for an interval).
 * The failure is injected by a trigger on `card_execution` for one card, removed after the flush.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';

const WAIT_MS = 60_000;

test('batch shape: a record refused in its flush is retried on its own and lands', async (t) => {
  const stack = await createStack('batch-record-retry', { config: { CARD_RUN_SHAPE: 'batch', CARD_START_MODE: 'client' } });
  try {
    // A day between checks: an execution row of the card in the test is the one check's.
    const account = await seedAccount(stack, {
      name: 'rec1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 3,
      intervalsSec: { card_status: 86_400 },
    });
    const [refused, ...others] = account.cards;
    assert.ok(refused !== undefined);
    const { pool } = stack.db;
    await pool.query('CREATE TABLE refuse_record (card_id bigint PRIMARY KEY)');
    await pool.query('INSERT INTO refuse_record VALUES ($1)', [refused.id]);
    await pool.query(`CREATE FUNCTION refuse_record() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF EXISTS (SELECT 1 FROM refuse_record WHERE card_id = NEW.card_id) THEN RAISE EXCEPTION 'injected: record of card % refused', NEW.card_id; END IF;
        RETURN NEW;
      END $$`);
    await pool.query('CREATE TRIGGER refuse_record BEFORE INSERT ON card_execution FOR EACH ROW EXECUTE FUNCTION refuse_record()');
    // Every card due now: one round claims them, one batch carries them.
    const now = Date.now();
    await stack.deps.store.upsertMany(account.cards.map((card) => ({ carrierId: account.carrier.id, cardId: card.id, dues: { card_status: now } })));
    const workers = await stack.startWorkers();
    await ensurePollingControl(
      { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX },
      { reconcileEveryMs: 2000 },
    );
    const rowsOf = async (cardIds: readonly string[]): Promise<{ card_id: string; workflow_id: string; outcome: string }[]> =>
      (
        await pool.query<{ card_id: string; workflow_id: string; outcome: string }>(
          'SELECT card_id::text, workflow_id, outcome FROM card_execution WHERE card_id = ANY($1::bigint[])',
          [cardIds],
        )
      ).rows;
    const landed = await waitFor(
      'the other cards’ records',
      async () => {
        const rows = await rowsOf(others.map((card) => card.id));
        return rows.length === others.length ? rows : undefined;
      },
      WAIT_MS,
    );
    // The flush tries each call 3 times within ~0.6 s: by now the refused card's record has failed there.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    assert.equal((await rowsOf([refused.id])).length, 0, 'the record is refused while the trigger stands');
    await pool.query('DELETE FROM refuse_record');
    const [row] = await waitFor(
      'the refused card’s record',
      async () => {
        const rows = await rowsOf([refused.id]);
        return rows.length > 0 ? rows : undefined;
      },
      WAIT_MS,
    );
    t.diagnostic(`record landed in ${row?.workflow_id} (the others in ${landed[0]?.workflow_id})`);
    assert.equal(row?.workflow_id, landed[0]?.workflow_id, 'written by the same batch run');
    assert.equal(row?.outcome, 'success');
    await workers.stop();
  } finally {
    await stack.close();
  }
});
