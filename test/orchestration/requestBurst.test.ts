/**
 * A burst of request-checks on one account is ordinary (issue 45): 300 cards requested at once
 * through the API's path (serveRequestCheck, 100 in flight) wake a workflow loop with a handful of
 * `priorityRequested` updates, not one each — 500 of them had two of its workflow tasks time out
 * and stopped its claiming for a minute — and a claim loop activity with none (it looks at the
 * priority lane every tick); every requested card is checked, with no workflow task timeout.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl, currentSchedulerStatus, type OrchestrationRef } from '../../src/app/temporalControl.js';
import { serveRequestCheck } from '../../src/app/requestCheckService.js';
import { schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { countEvents } from '../../bench/lib/actions.js';
import { Client } from '@temporalio/client';
import { SCHEDULER_LOOPS } from '../../src/workflow-safe/claimLoop.js';

const CARDS = 300;
const IN_FLIGHT = 100;
/** Generous: what is asserted is that every card is checked, not how fast (the bench measures that). */
const WAIT_MS = 90_000;

for (const loop of SCHEDULER_LOOPS) {
  test(`300 request-checks at once (SCHEDULER_LOOP=${loop}): ${loop === 'workflow' ? 'a few wake-ups' : 'no wake-up'} of the scheduler, no workflow task timeout, every card checked`, async (t) => {
    const stack = await createStack(`orch-burst-${loop}`, { config: { SCHEDULER_LOOP: loop } });
    try {
      const account = await seedAccount(stack, {
        name: 'burst1',
        qps: { main: 100 },
        typeGroups: { card_status: 'main' },
        cards: CARDS,
        intervalsSec: { card_status: 3600 },
        carrier: { inflightLimit: 200 },
      });
      const carrierId = account.carrier.id;
      // Nothing due on its own in the test: every check is a requested one.
      const now = Date.now();
      await stack.deps.store.upsertMany(account.cards.map((card) => ({ carrierId, cardId: card.id, dues: { card_status: now + 3_600_000 } })));
      await stack.startWorkers();
      // The API's client, counting the wake-ups it sends (an update the server buffers or refuses leaves no event to count).
      let wakesSent = 0;
      const client = new Client({
        connection: stack.client.connection,
        namespace: stack.config.TEMPORAL_NAMESPACE,
        interceptors: {
          workflow: [
            {
              startUpdate: (input, next) => {
                if (input.updateName === 'priorityRequested') wakesSent += 1;
                return next(input);
              },
            },
          ],
        },
      });
      const ref: OrchestrationRef = { client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
      await ensurePollingControl(ref);
      await waitFor(
        'the scheduler’s first round',
        async () => ((await currentSchedulerStatus(ref, stack.deps.store, carrierId).catch(() => undefined))?.rounds ?? 0) >= 1,
        WAIT_MS,
      );

      const since = new Date();
      const queue = [...account.cards];
      let requested = 0;
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          for (let card = queue.shift(); card !== undefined; card = queue.shift()) {
            // As the API serves it: the update wakes only a workflow loop (src/api/routes/requestCheck.ts).
            const result = await serveRequestCheck(
              ref,
              stack.services.requests,
              carrierId,
              { cardId: card.id, types: ['card_status'], actor: 'burst' },
              { wake: loop === 'workflow' },
            );
            requested += result.requested;
          }
        }),
      );
      assert.equal(requested, CARDS, 'every request put its card in the priority lane');
      await waitFor(
        `a check of each of the ${CARDS} cards`,
        async () => {
          const { rows } = await stack.db.pool.query<{ n: string }>('SELECT count(DISTINCT card_id)::text AS n FROM card_execution WHERE started_at >= $1', [
            since,
          ]);
          return Number(rows[0]?.n) === CARDS;
        },
        WAIT_MS,
      );

      const events = (await stack.client.workflow.getHandle(schedulerWorkflowId(carrierId, ref.workflowIdPrefix)).fetchHistory()).events ?? [];
      const accepted = events.filter(
        (event) => event.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name === 'priorityRequested',
      ).length;
      const counts = countEvents(events);
      t.diagnostic(
        `${wakesSent} priorityRequested updates sent (${accepted} accepted) for ${CARDS} requests; ${counts.workflowTasks} workflow tasks, ${counts.workflowTaskTimeouts} timeouts`,
      );
      if (loop === 'workflow') {
        assert.ok(accepted >= 1, 'the burst woke the scheduler');
        assert.ok(wakesSent <= CARDS / 10, `${wakesSent} wake-ups sent for ${CARDS} requests: callers arriving while one is in flight share the next`);
      } else assert.deepEqual([wakesSent, accepted], [0, 0], 'a claim loop needs no wake-up');
      assert.equal(counts.workflowTaskTimeouts, 0);
      assert.equal(counts.workflowTaskFailures, 0);
    } finally {
      await stack.close();
    }
  });
}
