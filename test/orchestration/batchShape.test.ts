/**
 * CARD_RUN_SHAPE=batch on the whole stack (real Temporal, Redis, PostgreSQL, simulator), in both
 * start modes of the workflow loop and with the claim loop activity: the claimed cards run in
 * cardBatch runs of at most CARD_BATCH_SIZE, each card's execution is recorded with its batch
 * run's ids, the run is found by `CardIds`, a card whose gateway step fails (a permanent answer) or
 * throws (an exception in the step's own code) fails alone, and the card detail links each
 * execution to its batch run.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WorkflowNotFoundError } from '@temporalio/client';
import { createStack, stackApi } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { CARD_IDS_ATTRIBUTE, CLAIMED_BY_ATTRIBUTE } from '../../src/workflow-safe/searchAttributes.js';
import { cardWorkflowId, schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { cardBatch } from '../../src/workflows/cardBatch.js';

const BATCH_SIZE = 4;

interface ExecutionRow {
  readonly card_id: string;
  readonly workflow_id: string;
  readonly run_id: string;
  readonly outcome: string;
}

interface DetailAnswer {
  readonly executions: { workflowId: string; runId: string; runUrl: string }[];
  readonly temporalUiUrl: string;
}

/**
 * The workflow loop in each start mode (CARD_START_MODE applies to it only), and the claim loop
 * activity, which starts its runs with the client (docs/design.md, 'The claim loop as an activity').
 */
const VARIANTS = [
  { name: 'CARD_START_MODE=client', label: 'client', account: 'batch1', loop: 'workflow', mode: 'client' },
  { name: 'CARD_START_MODE=child', label: 'child', account: 'batch2', loop: 'workflow', mode: 'child' },
  { name: 'SCHEDULER_LOOP=activity', label: 'loop', account: 'batch3', loop: 'activity', mode: 'client' },
] as const;

for (const { name, label, account: accountName, loop, mode } of VARIANTS) {
  test(`batch shape, ${name}: cards run in cardBatch runs traced by CardIds; a failing card fails alone`, async () => {
    const stack = await createStack(`batch-${label}`, {
      config: { SCHEDULER_LOOP: loop, CARD_RUN_SHAPE: 'batch', CARD_BATCH_SIZE: BATCH_SIZE, CARD_START_MODE: mode },
    });
    try {
      const account = await seedAccount(stack, {
        name: accountName,
        qps: { main: 50 },
        typeGroups: { card_status: 'main' },
        cards: 9,
        intervalsSec: { card_status: 600 },
      });
      const carrierId = account.carrier.id;
      // A card the carrier refuses for good: an ICCID we accept (17 digits and a check character)
      // that the simulator answers `invalid_iccid` (permanent) for every call.
      const refused = await stack.services.lifecycle.createCards([{ iccid: '89860000000000009F', carrierId, status: 'active', enablePolling: true }]);
      const badCard = refused.created[0];
      assert.ok(badCard, JSON.stringify(refused.rejected));
      // A card whose step throws: the workers' gateway client raises a TypeError for its ICCID,
      // an exception the step's code did not expect (not a classified gateway answer).
      const throwing = account.cards[0]!;
      const gateway = stack.deps.gateway;
      const check = gateway.check.bind(gateway);
      gateway.check = async (type, card, options) => {
        if (card.iccid === throwing.iccid) throw new TypeError(`injected: the gateway client broke on ${card.iccid}`);
        return check(type, card, options);
      };
      const failing = new Set([badCard.id, throwing.id]);
      const cards = [...account.cards, badCard];
      // Every card due now, so one round claims them all and cuts them into batches.
      const now = Date.now();
      await stack.deps.store.upsertMany(cards.map((card) => ({ carrierId, cardId: card.id, dues: { card_status: now } })));
      await stack.startWorkers();
      await ensurePollingControl(
        { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX },
        { reconcileEveryMs: 2000 },
      );

      const rows = await waitFor(
        'one recorded execution of every card',
        async () => {
          const { rows } = await stack.db.pool.query<ExecutionRow>('SELECT card_id::text, workflow_id, run_id, outcome FROM card_execution');
          return new Set(rows.map((row) => row.card_id)).size === cards.length ? rows : undefined;
        },
        60_000,
      );
      const batchPrefix = `${stack.config.WORKFLOW_ID_PREFIX}card-batch-${carrierId}-`;
      for (const row of rows) assert.ok(row.workflow_id.startsWith(batchPrefix), `${row.card_id} ran in ${row.workflow_id}`);
      // The refused card's step failed and the throwing card's too; the others of their batches
      // (and every other) succeeded.
      for (const row of rows) assert.equal(row.outcome, failing.has(row.card_id) ? 'failed' : 'success', JSON.stringify(row));
      const thrown = await stack.deps.store.readDue(carrierId, throwing.id);
      assert.match(
        thrown?.types.card_status.err ?? '',
        /^TypeError\|injected: the gateway client broke/,
        'the exception is the step failure that the card keeps',
      );
      // No card ran in a cardCheck run.
      await assert.rejects(stack.client.workflow.getHandle(cardWorkflowId(cards[0]!.id, stack.config.WORKFLOW_ID_PREFIX)).describe(), WorkflowNotFoundError);

      const scheduler = schedulerWorkflowId(carrierId, stack.config.WORKFLOW_ID_PREFIX);
      const batches = new Map<string, { workflowId: string; runId: string; cardIds: string[] }>();
      for (const row of rows) {
        const key = `${row.workflow_id}/${row.run_id}`;
        const batch = batches.get(key) ?? { workflowId: row.workflow_id, runId: row.run_id, cardIds: [] };
        batch.cardIds.push(row.card_id);
        batches.set(key, batch);
      }
      assert.ok(
        [...batches.values()].some((batch) => batch.cardIds.length > 1),
        `cards share runs: ${JSON.stringify([...batches.values()].map((b) => b.cardIds))}`,
      );
      for (const batch of batches.values()) {
        assert.ok(batch.cardIds.length <= BATCH_SIZE, JSON.stringify(batch));
        const handle = stack.client.workflow.getHandle<typeof cardBatch>(batch.workflowId, batch.runId);
        // The batch completes (one card's failure does not fail it) and counts each card's outcome.
        const { outcomes } = await handle.result();
        const description = await handle.describe();
        assert.equal(description.type, 'cardBatch');
        assert.equal(description.status.name, 'COMPLETED');
        const carried = description.typedSearchAttributes.get(CARD_IDS_ATTRIBUTE) ?? [];
        for (const cardId of batch.cardIds) assert.ok(carried.includes(cardId), `${batch.workflowId} carries ${carried.join(',')}, ran ${cardId}`);
        assert.match(description.typedSearchAttributes.get(CLAIMED_BY_ATTRIBUTE) ?? '', new RegExp(`^${scheduler}/`));
        assert.equal(description.raw.workflowExecutionInfo?.parentExecution?.workflowId ?? undefined, mode === 'child' ? scheduler : undefined);
        const failed = batch.cardIds.filter((cardId) => failing.has(cardId)).length;
        assert.equal(outcomes.failure ?? 0, failed, JSON.stringify(outcomes));
        assert.equal(outcomes.success ?? 0, batch.cardIds.length - failed, JSON.stringify(outcomes));
      }

      // Tracing one card: the Web UI query `CardIds = "<id>"` finds the run that checked it.
      const traced = badCard.id;
      const tracedRow = rows.find((row) => row.card_id === traced)!;
      const listed = await waitFor(
        `runs listed by CardIds = "${traced}"`,
        async () => {
          const found: string[] = [];
          for await (const run of stack.client.workflow.list({ query: `CardIds = "${traced}" AND WorkflowId STARTS_WITH "${batchPrefix}"` })) {
            found.push(`${run.workflowId}/${run.runId}`);
          }
          return found.length > 0 ? found : undefined;
        },
        30_000,
      );
      assert.ok(listed.includes(`${tracedRow.workflow_id}/${tracedRow.run_id}`), JSON.stringify(listed));

      // The card detail: the execution's run is the batch run, linked; the card's Web UI list is the CardIds query.
      const app = await stackApi(stack);
      try {
        const headers = { authorization: `Bearer ${stack.config.API_TOKEN}` };
        const detail = (await app.inject({ method: 'GET', url: `/v1/cards/${traced}`, headers })).json<DetailAnswer>();
        // Found by its run, not taken as the latest: the card may have been checked again since
        // (a clean-clone CI run on a slow machine saw its next batch's execution listed first).
        const execution = detail.executions.find((e) => e.runId === tracedRow.run_id);
        assert.deepEqual([execution?.workflowId, execution?.runId], [tracedRow.workflow_id, tracedRow.run_id], JSON.stringify(detail.executions));
        assert.ok(execution?.runUrl.endsWith(`/workflows/${encodeURIComponent(tracedRow.workflow_id)}/${tracedRow.run_id}/history`), execution?.runUrl);
        assert.ok(detail.temporalUiUrl.endsWith(`/workflows?query=${encodeURIComponent(`CardIds="${traced}"`)}`), detail.temporalUiUrl);
        const lookup = (await app.inject({ method: 'GET', url: `/dashboard/api/cards/lookup?q=${traced}`, headers })).json<{ workflowsQuery: string }>();
        assert.equal(lookup.workflowsQuery, `CardIds="${traced}"`);
      } finally {
        await app.close();
      }
    } finally {
      await stack.close();
    }
  });
}
