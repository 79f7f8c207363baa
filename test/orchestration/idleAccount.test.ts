/**
 * An idle account costs what it does (docs/design.md, 'Idle accounts'): its scheduler, finding
 * nothing due nor in flight, sleeps until the lanes' next due time instead of claiming every
 * second; a card made due sooner through the lifecycle wakes it (lua/wakeIfIdle.lua → `wake`
 * signal; request-checks wake it through their own update, test/orchestration/requestCheck.test.ts). The longest sleep here is 10 minutes, so a card checked
 * within the test's wait was claimed because something woke the scheduler, not by its own wake-up.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl, currentSchedulerStatus, type OrchestrationRef } from '../../src/app/temporalControl.js';
import { schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { countEvents, type HistoryEvent } from '../../bench/lib/actions.js';

const IDLE_MAX_MS = 600_000;
/** Generous: what is asserted is that the card is checked at all before the scheduler's own wake-up, not how fast. */
const WAIT_MS = 45_000;
/** How long the idle scheduler is watched: a ticking one makes a round a second. */
const WATCH_MS = 8_000;

const executions = async (pool: { query: (sql: string, params: unknown[]) => Promise<{ rows: { n: string }[] }> }, cardId: string): Promise<number> =>
  Number((await pool.query('SELECT count(*)::text AS n FROM card_execution WHERE card_id = $1::bigint', [cardId])).rows[0]?.n ?? 0);

test('an idle account sleeps between rounds, and a card the lifecycle makes due wakes it', async (t) => {
  const stack = await createStack('orch-idle', { config: { SCHEDULER_IDLE_MAX_MS: IDLE_MAX_MS } });
  try {
    const account = await seedAccount(stack, {
      name: 'idle1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 0,
      intervalsSec: { card_status: 2 },
    });
    const carrierId = account.carrier.id;
    const workers = await stack.startWorkers();
    const ref: OrchestrationRef = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref);
    const handle = stack.client.workflow.getHandle(schedulerWorkflowId(carrierId, ref.workflowIdPrefix));
    await waitFor(
      'the scheduler’s first round',
      async () => ((await currentSchedulerStatus(ref, stack.deps.store, carrierId).catch(() => undefined))?.rounds ?? 0) >= 1,
      WAIT_MS,
    );

    // Nothing to do: the rounds it makes while watched (a ticking loop: one a second).
    const roundsBefore = (await currentSchedulerStatus(ref, stack.deps.store, carrierId)).rounds;
    await new Promise((resolve) => setTimeout(resolve, WATCH_MS));
    const roundsWatched = (await currentSchedulerStatus(ref, stack.deps.store, carrierId)).rounds - roundsBefore;
    t.diagnostic(`rounds in ${WATCH_MS} ms idle: ${roundsWatched}`);
    assert.ok(roundsWatched <= 1, `an idle scheduler sleeps: ${roundsWatched} rounds in ${WATCH_MS} ms`);

    // A card created through the lifecycle, due within its 2 s interval: the write wakes the scheduler
    // (a workflow loop by a wake signal; a claim loop activity finds the idle mark gone at its next tick).
    const card = await stack.services.lifecycle.createCard({ iccid: '89860000881000000001', carrierId, status: 'active', enablePolling: true });
    await waitFor(`an execution of the new card ${card.id}`, async () => (await executions(stack.db.pool, card.id)) > 0, WAIT_MS);
    const history = (await handle.fetchHistory()).events ?? [];
    const wakes = history.filter((event: HistoryEvent) => event.workflowExecutionSignaledEventAttributes?.signalName === 'wake').length;
    if (stack.config.SCHEDULER_LOOP === 'workflow') assert.ok(wakes >= 1, 'the lifecycle write woke the scheduler with a wake signal');
    else assert.equal(wakes, 0, 'a claim loop needs no wake signal');

    const counts = countEvents(history);
    t.diagnostic(`scheduler history: ${counts.workflowTasks} workflow tasks, ${counts.localActivities} local activities, ${counts.timers} timers`);
    await workers.stop();
  } finally {
    await stack.close();
  }
});
