/**
 * Records the histories the replay test (test/replay/replay.test.ts) runs the workflow code
 * against: one test stack on the running services (`npx tsx scripts/services.ts up --test`),
 * one account whose cards are checked every few seconds, a request-check through the scheduler's
 * update, and a scheduler short enough to continue-as-new. Saves to test/replay/histories/:
 *
 * - `pollingControl.json`: the control loop, with its reconcile rounds and scheduler starts;
 * - `carrierScheduler.json`: a scheduler run from its start to its continue-as-new (claims, child
 *   starts, the request-check update);
 * - `cardCheck.json`, `cardCheck-priority.json`: completed card runs from the normal and priority lanes;
 * - `cardBatch.json` (a second stack, CARD_RUN_SHAPE=batch): a completed batch run of several
 *   cards, one of which the carrier refuses (a failed step).
 *
 * Run it again (`npx tsx scripts/recordHistories.ts`) after a deliberate, versioned workflow
 * change, so the histories describe what the current code records; `… card` or `… batch` records
 * only that shape's histories.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import { EVENT_TYPE_PREFIX, type RecordedHistory } from '../test/replay/recorded.js';
import { createStack } from '../test/helpers/orchestration.js';
import { seedAccount, waitFor } from '../test/helpers/seed.js';
import { ensurePollingControl, requestCheck } from '../src/polling/temporalControl.js';
import { pollingControlWorkflowId, schedulerWorkflowId } from '../src/common/orchestration.js';

const { temporal } = proto;
const OUT = fileURLToPath(new URL('../test/replay/histories/', import.meta.url));
/** Small enough to roll over within seconds, large enough for several claim rounds. */
const SCHEDULER_MAX_HISTORY_EVENTS = 150;

async function save(client: Client, name: string, workflowId: string, runId?: string): Promise<void> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  const events = (history.events ?? []).map((event) => String(temporal.api.enums.v1.EventType[event.eventType ?? 0]).replace(EVENT_TYPE_PREFIX, ''));
  const recorded: RecordedHistory = {
    workflowId,
    workflowType: name.split('-')[0] ?? name,
    events,
    // The binary protobuf encoding: read back with the SDK's own classes, independent of the JSON mapping.
    historyBase64: Buffer.from(temporal.api.history.v1.History.encode(history).finish()).toString('base64'),
  };
  const file = join(OUT, `${name}.json`);
  writeFileSync(file, `${JSON.stringify(recorded, null, 1)}\n`);
  process.stdout.write(`${name}: ${events.length} events → ${file}\n`);
}

async function completedRun(client: Client, query: string): Promise<{ workflowId: string; runId: string }> {
  return waitFor(
    `a completed run (${query})`,
    async () => {
      for await (const execution of client.workflow.list({ query })) return { workflowId: execution.workflowId, runId: execution.runId };
      return undefined;
    },
    60_000,
    500,
  );
}

/** pollingControl, carrierScheduler and cardCheck runs: one stack in the default (card) shape. */
async function recordCardShape(): Promise<void> {
  const stack = await createStack('record-histories');
  try {
    mkdirSync(OUT, { recursive: true });
    const account = await seedAccount(stack, {
      name: 'rec1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main', carddata: 'main' },
      cards: 4,
      intervalsSec: { card_status: 2, carddata: 4 },
    });
    const workers = await stack.startWorkers();
    const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref, { reconcileEveryMs: 2000, scheduler: { maxHistoryEvents: SCHEDULER_MAX_HISTORY_EVENTS } });
    const schedulerId = schedulerWorkflowId(account.carrier.id, ref.workflowIdPrefix);
    const firstSchedulerRun = await waitFor(
      'the scheduler to start',
      async () =>
        (
          await stack.client.workflow
            .getHandle(schedulerId)
            .describe()
            .catch(() => undefined)
        )?.runId,
      30_000,
    );
    await waitFor(
      'two executions of every card',
      async () => {
        const { rows } = await stack.db.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM card_execution GROUP BY card_id HAVING count(*) >= 2');
        return rows.length === account.cards.length || undefined;
      },
      60_000,
    );
    const card = account.cards[0];
    if (!card) throw new Error('no card seeded');
    await requestCheck(ref, account.carrier.id, { cardId: card.id, types: ['card_status'], lane: 'priority', cooldownMs: 0, actor: 'recordHistories' });
    const prefix = ref.workflowIdPrefix;
    const priority = await waitFor(
      'the priority run to be recorded',
      async () => {
        const { rows } = await stack.db.pool.query<{ workflow_id: string; run_id: string }>(
          'SELECT workflow_id, run_id FROM card_execution WHERE from_priority LIMIT 1',
        );
        return rows[0] ? { workflowId: rows[0].workflow_id, runId: rows[0].run_id } : undefined;
      },
      60_000,
    );
    const normal = await completedRun(stack.client, `WorkflowType = "cardCheck" AND ExecutionStatus = "Completed" AND WorkflowId STARTS_WITH "${prefix}card-"`);
    // The first scheduler run holds the request-check only if it had not rolled over yet; either way it ends in continue-as-new.
    await waitFor(
      'the first scheduler run to continue as new',
      async () => (await stack.client.workflow.getHandle(schedulerId, firstSchedulerRun).describe()).status.name === 'CONTINUED_AS_NEW' || undefined,
      60_000,
      500,
    );
    await save(stack.client, 'pollingControl', pollingControlWorkflowId(prefix));
    await save(stack.client, 'carrierScheduler', schedulerId, firstSchedulerRun);
    await save(stack.client, 'carrierScheduler-current', schedulerId);
    await save(stack.client, 'cardCheck', normal.workflowId, normal.runId);
    await save(stack.client, 'cardCheck-priority', priority.workflowId, priority.runId);
    await workers.stop();
  } finally {
    await stack.close();
  }
}

/** A cardBatch run: a stack in the batch shape, every card due at once, one refused by the carrier. */
async function recordBatchShape(): Promise<void> {
  const stack = await createStack('record-batch-histories', { config: { CARD_RUN_SHAPE: 'batch', CARD_BATCH_SIZE: 4 } });
  try {
    mkdirSync(OUT, { recursive: true });
    const account = await seedAccount(stack, {
      name: 'rec2',
      qps: { main: 20 },
      typeGroups: { card_status: 'main', carddata: 'main' },
      cards: 5,
      intervalsSec: { card_status: 600, carddata: 600 },
    });
    const carrierId = account.carrier.id;
    // An ICCID we accept that the simulator refuses (`invalid_iccid`): a failed step in the batch.
    const refused = await stack.services.lifecycle.createCards([{ iccid: '89860000000000008F', carrierId, status: 'active', enablePolling: true }]);
    const cards = [...account.cards, ...refused.created];
    const now = Date.now();
    await stack.deps.store.upsertMany(cards.map((card) => ({ carrierId, cardId: card.id, dues: { card_status: now, carddata: now } })));
    const workers = await stack.startWorkers();
    await ensurePollingControl(
      { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX },
      { reconcileEveryMs: 2000 },
    );
    const batch = await waitFor(
      'the refused card recorded in its batch',
      async () => {
        const { rows } = await stack.db.pool.query<{ workflow_id: string; run_id: string }>(
          'SELECT workflow_id, run_id FROM card_execution WHERE card_id = $1::bigint LIMIT 1',
          [refused.created[0]?.id],
        );
        return rows[0] ? { workflowId: rows[0].workflow_id, runId: rows[0].run_id } : undefined;
      },
      60_000,
    );
    await stack.client.workflow.getHandle(batch.workflowId, batch.runId).result();
    await save(stack.client, 'cardBatch', batch.workflowId, batch.runId);
    await workers.stop();
  } finally {
    await stack.close();
  }
}

const shapes = process.argv.slice(2);
if (shapes.length === 0 || shapes.includes('card')) await recordCardShape();
if (shapes.length === 0 || shapes.includes('batch')) await recordBatchShape();
