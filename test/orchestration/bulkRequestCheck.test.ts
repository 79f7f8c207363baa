/**
 * A bulk request-check (`POST /v1/request-checks`; docs/design.md §11): many cards in one call,
 * one result per card; with SCHEDULER_LOOP=workflow the account's scheduler is woken once, not once
 * per card; with claim loop activities (which look at the priority lane every tick) not at all;
 * every requested card is checked from the priority lane. Unknown cards, and cards whose account's scheduler does
 * not run, are answered per card, with nothing written for them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createApiStack, type ErrorAnswer } from '../api/helpers.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import type { HistoryEvent } from '../../bench/lib/actions.js';
import type { BulkAnswer } from '../../src/app/bulkRequestCheck.js';
import { SCHEDULER_LOOPS } from '../../src/workflow-safe/claimLoop.js';

const WAIT_MS = 60_000;

for (const loop of SCHEDULER_LOOPS) {
  test(`bulk request-check (SCHEDULER_LOOP=${loop}): ids and filter, one result per card, ${loop === 'workflow' ? 'one wake per account' : 'no wake'}, every card checked`, async (t) => {
    const api = await createApiStack(`orch-bulk-${loop}`, { SCHEDULER_LOOP: loop });
    const { stack } = api;
    try {
      // Cards due in a day: what is checked in the test was requested.
      const account = await seedAccount(stack, {
        name: 'bulk1',
        qps: { main: 20 },
        typeGroups: { card_status: 'main' },
        cards: 40,
        intervalsSec: { card_status: 86_400 },
      });
      const other = await seedAccount(stack, {
        name: 'bulk2',
        qps: { main: 5 },
        typeGroups: { card_status: 'main' },
        cards: 2,
        intervalsSec: { card_status: 86_400 },
      });
      await stack.db.pool.query('UPDATE carrier_account SET enabled = false WHERE id = $1', [other.carrier.id]);
      const workers = await stack.startWorkers();
      await ensurePollingControl(api.ref);
      const handle = stack.client.workflow.getHandle(schedulerWorkflowId(account.carrier.id, api.ref.workflowIdPrefix));
      await waitFor('the scheduler', async () => (await handle.describe().catch(() => undefined))?.status.name === 'RUNNING', WAIT_MS);
      await new Promise((resolve) => setTimeout(resolve, 2000));
      const executionsBefore = Number(
        (await stack.db.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM card_execution WHERE carrier_id = $1', [account.carrier.id])).rows[0]?.n,
      );

      const invalid = await api.call<ErrorAnswer>('POST', '/v1/request-checks', { types: ['card_status'] });
      assert.deepEqual([invalid.status, invalid.body.error.field], [400, 'cardIds'], JSON.stringify(invalid.body));
      const both = await api.call<ErrorAnswer>('POST', '/v1/request-checks', {
        types: ['card_status'],
        cardIds: ['1'],
        filter: { carrierId: account.carrier.id },
      });
      assert.equal(both.status, 400);

      const byId = account.cards.slice(0, 20).map((card) => card.id);
      const ids = await api.call<BulkAnswer>('POST', '/v1/request-checks', {
        types: ['card_status'],
        cardIds: [...byId, '999999999', ...other.cards.map((card) => card.id)],
      });
      assert.equal(ids.status, 200, JSON.stringify(ids.body));
      assert.deepEqual(ids.body.counts, { requested: 20, cooldown: 0, not_polled: 0, not_found: 1, unavailable: 2, failed: 0 });
      assert.equal(ids.body.results.length, 23);
      assert.equal(ids.body.results[20]?.status, 'not_found');

      const byFilter = await api.call<BulkAnswer>('POST', '/v1/request-checks', {
        types: ['card_status'],
        filter: { carrierId: account.carrier.id, status: 'active' },
      });
      assert.equal(byFilter.status, 200, JSON.stringify(byFilter.body));
      // The first 20 merge into their open items (requested again), the other 20 are new.
      assert.equal(byFilter.body.cards, 40);
      assert.equal(byFilter.body.counts.requested + byFilter.body.counts.cooldown, 40);

      await waitFor(
        'a priority check of each of the 40 cards',
        async () =>
          Number(
            (
              await stack.db.pool.query<{ n: string }>(
                'SELECT count(DISTINCT card_id)::text AS n FROM card_execution WHERE carrier_id = $1 AND from_priority',
                [account.carrier.id],
              )
            ).rows[0]?.n,
          ) >= 40,
        WAIT_MS,
      );
      const wakes = ((await handle.fetchHistory()).events ?? []).filter(
        (event: HistoryEvent) => event.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name === 'priorityRequested',
      ).length;
      t.diagnostic(`executions before the requests: ${executionsBefore}; priorityRequested updates: ${wakes} for 60 requests in 2 calls`);
      if (loop === 'workflow') assert.ok(wakes >= 1 && wakes <= 2, `one wake per account and call: ${wakes}`);
      else assert.equal(wakes, 0, 'claim loops need no wake');
      await workers.stop();
    } finally {
      await api.close();
    }
  });
}
