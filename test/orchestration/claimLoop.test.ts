/**
 * SCHEDULER_LOOP=activity (docs/design.md, 'The claim loop as an activity'): an account's claiming
 * runs in laps of a long claim loop activity, not in a workflow task per round. Its cards are
 * checked, a request-check reaches its card, a pause stops claiming and a resume starts it again,
 * a loop superseded in Redis ends and the scheduler starts the next lap — and the scheduler's
 * history grows by its messages and laps only, not by the second.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl, requestCheck, schedulerStatus, type OrchestrationRef } from '../../src/app/temporalControl.js';
import { schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { pauseSignal, resumeSignal } from '../../src/workflows/messages.js';
import { countEvents, type HistoryEvent } from '../../bench/lib/actions.js';

/** Generous: what is asserted is what the loop decided, not how fast. */
const WAIT_MS = 60_000;
/** How long the busy account is watched: a workflow loop makes a workflow task a second. */
const WATCH_MS = 8_000;

type Pool = { query: (sql: string, params: unknown[]) => Promise<{ rows: { n: string }[] }> };
const executionsOf = async (pool: Pool, carrierId: string): Promise<number> =>
  Number((await pool.query('SELECT count(*)::text AS n FROM card_execution WHERE carrier_id = $1::bigint', [carrierId])).rows[0]?.n ?? 0);
const executionsOfCard = async (pool: Pool, cardId: string): Promise<number> =>
  Number((await pool.query('SELECT count(*)::text AS n FROM card_execution WHERE card_id = $1::bigint', [cardId])).rows[0]?.n ?? 0);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

test('claim loop activity: cards checked without a workflow task per round; request, pause, resume, supersede', async (t) => {
  const stack = await createStack('orch-claimloop', { config: { SCHEDULER_LOOP: 'activity', CARD_RUN_SHAPE: 'batch' } });
  try {
    const account = await seedAccount(stack, {
      name: 'loop1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 10,
      intervalsSec: { card_status: 2 },
    });
    const carrierId = account.carrier.id;
    const workers = await stack.startWorkers();
    const ref: OrchestrationRef = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref);
    const handle = stack.client.workflow.getHandle(schedulerWorkflowId(carrierId, ref.workflowIdPrefix));
    await waitFor('executions of every card', async () => (await executionsOf(stack.db.pool, carrierId)) >= 20, WAIT_MS);

    // Busy, watched: the account's cards keep being checked, its scheduler's history stands still.
    const tasksBefore = countEvents((await handle.fetchHistory()).events ?? []).workflowTasks;
    const executionsBefore = await executionsOf(stack.db.pool, carrierId);
    const roundsBefore = (await stack.deps.store.loopView(carrierId)) ?? '';
    await sleep(WATCH_MS);
    const tasksWatched = countEvents((await handle.fetchHistory()).events ?? []).workflowTasks - tasksBefore;
    const executionsWatched = (await executionsOf(stack.db.pool, carrierId)) - executionsBefore;
    const view = JSON.parse((await stack.deps.store.loopView(carrierId)) ?? '{}') as { rounds?: number };
    t.diagnostic(
      `in ${WATCH_MS} ms: ${executionsWatched} executions, ${tasksWatched} scheduler workflow tasks, view ${roundsBefore.slice(0, 60)} → rounds ${view.rounds}`,
    );
    assert.ok(executionsWatched >= 20, `the account is checked while watched: ${executionsWatched} executions`);
    assert.equal(tasksWatched, 0, 'no scheduler workflow task while the loop claims');
    assert.ok((view.rounds ?? 0) >= 4, `the loop publishes its rounds: ${view.rounds}`);

    // A request-check, through the scheduler's update, reaches its card.
    const card = account.cards[0];
    assert.ok(card !== undefined);
    const beforeRequest = await executionsOfCard(stack.db.pool, card.id);
    const result = await requestCheck(ref, carrierId, { cardId: card.id, types: ['card_status'], actor: 'test', source: 'test' });
    assert.equal(result.requested, 1);
    await waitFor('the requested card’s check', async () => (await executionsOfCard(stack.db.pool, card.id)) > beforeRequest, WAIT_MS);

    // Paused: the lap ends, nothing claims; the status says paused.
    await handle.signal(pauseSignal);
    await waitFor('the paused status', async () => (await schedulerStatus(ref, carrierId).catch(() => undefined))?.paused === true, WAIT_MS);
    await sleep(3000); // runs claimed before the pause finish
    const pausedAt = await executionsOf(stack.db.pool, carrierId);
    await sleep(4000);
    assert.equal(await executionsOf(stack.db.pool, carrierId), pausedAt, 'no check while paused');
    const depths = await stack.deps.store.depths(carrierId);
    assert.equal(depths.running, 0, 'no claim while paused');

    // Resumed: a new lap claims again.
    await handle.signal(resumeSignal);
    await waitFor('checks after the resume', async () => (await executionsOf(stack.db.pool, carrierId)) >= pausedAt + 10, WAIT_MS);

    // Superseded (what a loop left on a frozen worker finds when a newer lap owns the account): it
    // ends, and the scheduler starts the next lap, which claims again.
    const lapsBefore =
      (await handle.fetchHistory()).events?.filter((e: HistoryEvent) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runClaimLoop').length ??
      0;
    await stack.deps.store.ownClaimLoop(carrierId, 'someone-else');
    await waitFor(
      'the next lap',
      async () =>
        ((await handle.fetchHistory()).events?.filter((e: HistoryEvent) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runClaimLoop')
          .length ?? 0) > lapsBefore,
      WAIT_MS,
    );
    const supersededAt = await executionsOf(stack.db.pool, carrierId);
    await waitFor('checks in the next lap', async () => (await executionsOf(stack.db.pool, carrierId)) >= supersededAt + 10, WAIT_MS);

    const counts = countEvents((await handle.fetchHistory()).events ?? []);
    t.diagnostic(`scheduler history: ${counts.events} events, ${counts.workflowTasks} workflow tasks, ${counts.actions} actions`);
    assert.equal(counts.workflowTaskFailures + counts.workflowTaskTimeouts, 0, 'no workflow task failed or timed out');
    await workers.stop();
  } finally {
    await stack.close();
  }
});

test('claim loop activity: an idle account’s loop skips its rounds, and a lifecycle write ends the sleep', async (t) => {
  const stack = await createStack('orch-claimloop-idle', { config: { SCHEDULER_LOOP: 'activity', SCHEDULER_IDLE_MAX_MS: 600_000 } });
  try {
    const account = await seedAccount(stack, {
      name: 'loop2',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 0,
      intervalsSec: { card_status: 2 },
    });
    const carrierId = account.carrier.id;
    const workers = await stack.startWorkers();
    const ref: OrchestrationRef = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref);
    const rounds = async (): Promise<number> => (JSON.parse((await stack.deps.store.loopView(carrierId)) ?? '{}') as { rounds?: number }).rounds ?? 0;
    await waitFor('the loop’s first round', async () => (await rounds()) >= 1, WAIT_MS);
    const before = await rounds();
    await sleep(WATCH_MS);
    const watched = (await rounds()) - before;
    t.diagnostic(`rounds in ${WATCH_MS} ms idle: ${watched}`);
    assert.ok(watched <= 1, `an idle account's loop skips its rounds: ${watched}`);

    const card = await stack.services.lifecycle.createCard({ iccid: '89860000882000000001', carrierId, status: 'active', enablePolling: true });
    await waitFor(`an execution of the new card ${card.id}`, async () => (await executionsOfCard(stack.db.pool, card.id)) > 0, WAIT_MS);
    await workers.stop();
  } finally {
    await stack.close();
  }
});

test('claim loop activity, batch shape: cards of several accounts share batch runs, each checked under its own account', async (t) => {
  const stack = await createStack('orch-claimloop-shared', { config: { SCHEDULER_LOOP: 'activity', CARD_RUN_SHAPE: 'batch' } });
  try {
    const accounts = [];
    for (let i = 1; i <= 4; i += 1) {
      accounts.push(
        await seedAccount(stack, { name: `share${i}`, qps: { main: 10 }, typeGroups: { card_status: 'main' }, cards: 2, intervalsSec: { card_status: 2 } }),
      );
    }
    const workers = await stack.startWorkers();
    const ref: OrchestrationRef = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref);
    for (const account of accounts)
      await waitFor(`checks of ${account.carrier.name}`, async () => (await executionsOf(stack.db.pool, account.carrier.id)) >= 6, WAIT_MS);
    // Each execution row names its run and its card's account: a run with rows of several accounts was shared.
    const { rows } = await stack.db.pool.query<{ runs: string; shared: string; mismatched: string }>(
      `SELECT count(*)::text AS runs,
              count(*) FILTER (WHERE accounts > 1)::text AS shared,
              (SELECT count(*) FROM card_execution e JOIN iot_card c ON c.id = e.card_id WHERE c.carrier_id <> e.carrier_id)::text AS mismatched
         FROM (SELECT workflow_id, count(DISTINCT carrier_id) AS accounts FROM card_execution GROUP BY workflow_id) runs`,
    );
    const row = rows[0];
    t.diagnostic(`batch runs: ${row?.runs}, shared by several accounts: ${row?.shared}`);
    assert.ok(Number(row?.shared ?? 0) >= 1, 'some batch run carried cards of several accounts');
    assert.equal(Number(row?.mismatched ?? -1), 0, 'every card checked under its own account');
    await workers.stop();
  } finally {
    await stack.close();
  }
});
