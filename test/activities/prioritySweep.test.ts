/**
 * The priority retry sweep works a backlog off in slices (issue 46, item 8): one sweep requests at
 * most PRIORITY_SWEEP_MAX_ITEMS due items again, a few at a time, so a backlog of hundreds (deferred
 * under carrier pushback) no longer holds the scheduler's loop for seconds in one sweep; the next
 * sweeps take the rest.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackControlActivities } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';
import { PRIORITY_SWEEP_MAX_ITEMS } from '../../src/activities/control.js';

test('a retry sweep requests at most PRIORITY_SWEEP_MAX_ITEMS due items; the next one the rest', async () => {
  const stack = await createStack('priority-sweep');
  try {
    const cards = PRIORITY_SWEEP_MAX_ITEMS + 50;
    const account = await seedAccount(stack, {
      name: 'sweep1',
      qps: { main: 5 },
      typeGroups: { card_status: 'main' },
      cards,
      intervalsSec: { card_status: 600 },
    });
    for (const card of account.cards) {
      await stack.services.requests.requestCheck(account.carrier.id, { cardId: card.id, types: ['card_status'], actor: 'test', source: 'test' });
    }
    // Every item's retry due (as after a deferral), none requested in Redis any more.
    await stack.db.pool.query(`UPDATE polling_priority_item SET next_run_at = now() - interval '1 second' WHERE status = 'pending'`);
    const control = stackControlActivities(stack);
    const due = async (): Promise<number> =>
      Number(
        (await stack.db.pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM polling_priority_item WHERE status = 'pending' AND next_run_at <= now()`))
          .rows[0]?.n,
      );
    assert.equal(await due(), cards);
    assert.equal(await control.requeueDuePriorityItems({ carrierId: account.carrier.id }), PRIORITY_SWEEP_MAX_ITEMS);
    assert.equal(await due(), cards - PRIORITY_SWEEP_MAX_ITEMS, 'the requested ones are no longer due');
    assert.equal(await control.requeueDuePriorityItems({ carrierId: account.carrier.id }), cards - PRIORITY_SWEEP_MAX_ITEMS);
    assert.equal(await due(), 0);
  } finally {
    await stack.close();
  }
});
