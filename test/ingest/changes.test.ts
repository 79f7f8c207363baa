/**
 * Staleness (docs/design.md, 'Freshness'): an observation that carries the carrier's date of its
 * state records the change once, learned at the earliest observation that carried it; a card's
 * first observation is a state, not a change; the account's status reads the percentiles.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeRecords } from '../../src/ingest/writer.js';
import { stalenessByType, type LearnedChange } from '../../src/db/cardChanges.js';
import type { PriorityTransitions } from '../../src/app/ports.js';
import { createTestDb } from '../../testkit/db.js';
import { makeCard, makeRecord } from './fixtures.js';

const noPriority: PriorityTransitions = { executionFinished: async () => undefined };

test('a dated state is a change learned once, at its earliest observation; a first sight is not a change', async () => {
  const db = await createTestDb('card-changes');
  try {
    const learned: number[] = [];
    const writer = { pool: db.pool, priority: noPriority, learned: (changes: readonly LearnedChange[]) => learned.push(...changes.map((c) => c.stalenessMs)) };
    const card = await makeCard(db.pool);
    const rows = async (): Promise<{ changed: number; learned: number }[]> =>
      (
        await db.pool.query<{ changed: string; learned: string }>(
          "SELECT (extract(epoch FROM changed_at) * 1000)::bigint::text AS changed, (extract(epoch FROM learned_at) * 1000)::bigint::text AS learned FROM card_change WHERE card_id = $1 AND check_type = 'card_status' ORDER BY changed_at",
          [card.cardId],
        )
      ).rows.map((r) => ({ changed: Number(r.changed), learned: Number(r.learned) }));
    const t = Date.now() - 3_600_000;
    const status = (at: number, network: string, changedAt: number) =>
      makeRecord(card, at, [{ type: 'card_status', outcome: 'success', payload: { network }, changedAt }]);

    // First sight, dated an hour before: the product learns a state, not a change.
    await writeRecords(writer, [status(t, 'online', t - 3_600_000)]);
    assert.deepEqual(await rows(), []);
    // The state changed 60 s after that check; the next check, 90 s later, carries it.
    await writeRecords(writer, [status(t + 90_000, 'offline', t + 60_000)]);
    assert.deepEqual(await rows(), [{ changed: t + 60_000, learned: t + 90_000 }]);
    // Carried again by a later check: still one change, learned when first carried.
    await writeRecords(writer, [status(t + 180_000, 'offline', t + 60_000)]);
    // A check between the two arriving late (async ingest) learned it earlier.
    await writeRecords(writer, [status(t + 75_000, 'offline', t + 60_000)]);
    assert.deepEqual(await rows(), [{ changed: t + 60_000, learned: t + 75_000 }]);
    // A second change, and a batch holding two checks that carry it.
    await writeRecords(writer, [status(t + 400_000, 'online', t + 300_000), status(t + 350_000, 'online', t + 300_000)]);
    assert.deepEqual(await rows(), [
      { changed: t + 60_000, learned: t + 75_000 },
      { changed: t + 300_000, learned: t + 350_000 },
    ]);
    // An undated answer records no change.
    await writeRecords(writer, [makeRecord(card, t + 500_000, [{ type: 'card_status', outcome: 'success', payload: { network: 'offline' } }])]);
    assert.equal((await rows()).length, 2);

    // The metric hears of each change once, when first learned (not when an older check moves it earlier).
    assert.deepEqual(learned, [30_000, 50_000]);

    const staleness = await stalenessByType(db.pool, card.carrierId, 7_200_000);
    assert.deepEqual(Object.keys(staleness), ['card_status']);
    assert.equal(staleness.card_status?.changes, 2);
    assert.equal(staleness.card_status?.maxMs, 50_000);
    assert.equal(staleness.card_status?.p50Ms, 32_500, 'the median of 15 s and 50 s');
    // Past the window: nothing.
    assert.deepEqual(await stalenessByType(db.pool, card.carrierId, 60_000), {});
  } finally {
    await db.close();
  }
});
