/**
 * continueAsNew of carrierScheduler: with a tiny history threshold the scheduler
 * continues-as-new every few seconds while request-checks keep arriving, both as the update and
 * as the fire-and-forget signal. Every request must still be executed from the priority lane.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl, requestCheck } from '../../src/app/temporalControl.js';
import { requestCheckSignal, schedulerStatusQuery } from '../../src/workflows/messages.js';
import { schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import type { RequestCheckInput } from '../../src/workflow-safe/requestCheck.js';

const CARDS = 10;
/** Runs of the scheduler to see: three continue-as-new while requests are being sent. */
const RUNS_WANTED = 4;
/** Pause between two signals of the signal sender (see the sender). */
const SIGNAL_PACE_MS = 50;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface SentRequest {
  readonly cardId: string;
  readonly sentAt: Date;
  readonly via: 'update' | 'signal';
}

test('orchestration: carrierScheduler continues-as-new under a stream of request-checks without losing one', async (t) => {
  const began = Date.now();
  // Phase timings in the test output (TAP diagnostics), to see where the time goes.
  const phase = (what: string): void => t.diagnostic(`${((Date.now() - began) / 1000).toFixed(1)} s: ${what}`);
  const stack = await createStack('orch-can');
  try {
    // A one-hour interval: only the requests make a card run within the test (from the priority lane).
    const account = await seedAccount(stack, {
      name: 'can1',
      qps: { main: 50 },
      typeGroups: { card_status: 'main' },
      cards: CARDS,
      intervalsSec: { card_status: 3600 },
    });
    const carrierId = account.carrier.id;
    const workers = await stack.startWorkers();
    const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    // ~6 history events per idle tick, ~8 per request: a continue-as-new every few seconds.
    await ensurePollingControl(ref, { scheduler: { maxHistoryEvents: 60 } });
    const schedulerId = schedulerWorkflowId(carrierId, ref.workflowIdPrefix);
    // Without a run id the handle always addresses the scheduler's current run.
    const scheduler = stack.client.workflow.getHandle(schedulerId);
    const runIds = [await waitFor('the scheduler to start', async () => (await scheduler.describe().catch(() => undefined))?.runId, 20_000)];
    phase('scheduler running');

    // Three senders back to back (two by update, one by signal) and a watcher of the current run
    // id, until the scheduler continued-as-new several times: requests land before, during and
    // after each one, and there is hardly ever a moment without one in flight.
    const sent: SentRequest[] = [];
    const runsSeenAt: number[] = [];
    let stop = false;
    const sender = async (via: SentRequest['via'], offset: number): Promise<void> => {
      for (let i = offset; !stop; i += 3) {
        const card = account.cards[i % CARDS];
        assert.ok(card);
        const input: RequestCheckInput = { cardId: card.id, types: ['card_status'], lane: 'priority', actor: 'test', source: `continueAsNew.test/${via}` };
        const sentAt = new Date();
        if (via === 'update') {
          const result = await requestCheck(ref, carrierId, input);
          assert.deepEqual(result, { status: 'requested', requested: 1, types: { card_status: 'requested' } }, `update for card ${card.id}`);
        } else {
          await scheduler.signal(requestCheckSignal, input);
          // A signal returns before the workflow has seen it, so an unpaced sender is a firehose of
          // hundreds per second: the server then refuses every workflow task that would close the
          // run (continue-as-new) because newer signals arrived meanwhile, and the run can never
          // roll over. An update waits for the workflow; the signal sender is paced to a high but
          // finite rate (20/s on one account) instead.
          await sleep(SIGNAL_PACE_MS);
        }
        sent.push({ cardId: card.id, sentAt, via });
      }
    };
    const watcher = async (): Promise<void> => {
      while (runIds.length < RUNS_WANTED) {
        // Generous: with other test files on the same two cores a scheduler task can take seconds.
        if (Date.now() - began > 90_000) {
          const description = await scheduler.describe();
          const status = await scheduler.query(schedulerStatusQuery).catch((error: unknown) => ({ rounds: `unknown (${String(error)})` }));
          throw new Error(
            `only ${runIds.length} scheduler runs after ${sent.length} requests (history ${description.historyLength} events, ${status.rounds} claim rounds)`,
          );
        }
        const runId = (await scheduler.describe()).runId;
        if (runId !== runIds[runIds.length - 1]) {
          runIds.push(runId);
          runsSeenAt.push(sent.length);
        }
        await sleep(100);
      }
      // A few more requests into the last run before stopping.
      await sleep(1000);
    };
    await Promise.all([sender('update', 0), sender('update', 1), sender('signal', 2), watcher().finally(() => void (stop = true))]);
    phase(`${sent.length} requests sent; scheduler runs seen: ${runIds.length} (new run after request #${runsSeenAt.join(', #')})`);

    // Every request is followed by an execution of its card from the priority lane.
    const uncovered = await waitFor(
      'a priority execution of every requested card after its request',
      async () => {
        const { rows } = await stack.db.pool.query<{ card_id: string; started_at: Date }>(
          'SELECT card_id::text, started_at FROM card_execution WHERE from_priority',
        );
        const missing = sent.filter((request) => !rows.some((row) => row.card_id === request.cardId && row.started_at >= request.sentAt));
        return missing.length === 0 ? missing : undefined;
      },
      30_000,
    );
    assert.deepEqual(uncovered, []);
    phase('every request executed');

    // The durable side: every request reached PostgreSQL as one trigger of its card's priority
    // item (created or merged), and every item was worked off.
    const expected = new Map<string, number>();
    for (const request of sent) expected.set(request.cardId, (expected.get(request.cardId) ?? 0) + 1);
    const triggers = async (): Promise<{ perCard: Map<string, number>; open: number }> => {
      const { rows } = await stack.db.pool.query<{ card_id: string; triggers: string; open: string }>(
        "SELECT card_id::text, sum(trigger_count)::text AS triggers, count(*) FILTER (WHERE status IN ('pending', " +
          "'processing'))::text AS open FROM polling_priority_item GROUP BY card_id",
      );
      return { perCard: new Map(rows.map((r) => [r.card_id, Number(r.triggers)])), open: rows.reduce((sum, r) => sum + Number(r.open), 0) };
    };
    try {
      await waitFor(
        'every request as a trigger of a settled priority item',
        async () => {
          const { perCard, open } = await triggers();
          return open === 0 && [...expected].every(([cardId, n]) => perCard.get(cardId) === n);
        },
        15_000,
      );
    } catch (error) {
      const { perCard, open } = await triggers();
      const runs: string[] = [];
      for await (const run of stack.client.workflow.list({ query: `WorkflowId = "${schedulerId}"` })) runs.push(`${run.runId.slice(0, 8)} ${run.status.name}`);
      const diff = [...expected].map(([cardId, n]) => `card ${cardId}: sent ${n}, recorded ${perCard.get(cardId) ?? 0}`);
      assert.fail(`${String(error)}\n${open} items still open\n${diff.join('\n')}\nscheduler runs: ${runs.join(', ')}`);
    }
    phase('every request recorded and settled');

    // Temporal's own record: the earlier runs closed as continued-as-new.
    const continued = await waitFor(
      'the continued-as-new runs in visibility',
      async () => {
        let n = 0;
        for await (const run of stack.client.workflow.list({ query: `WorkflowId = "${schedulerId}" AND ExecutionStatus = "ContinuedAsNew"` }))
          if (run.workflowId === schedulerId) n += 1;
        return n >= RUNS_WANTED - 1 ? n : undefined;
      },
      15_000,
    );
    assert.ok(continued >= RUNS_WANTED - 1);
    // Both forms were exercised on both sides of a continue-as-new.
    const first = runsSeenAt[0] ?? 0;
    for (const via of ['update', 'signal'] as const) {
      assert.ok(
        sent.slice(0, first).some((r) => r.via === via),
        `${via} before the first continue-as-new`,
      );
      assert.ok(
        sent.slice(first).some((r) => r.via === via),
        `${via} after the first continue-as-new`,
      );
    }
    await workers.stop();
  } finally {
    await stack.close();
  }
});
