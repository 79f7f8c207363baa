/**
 * What one card execution costs the engine: its history events and workflow tasks,
 * in each placement of the gateway steps (local activities by default, the gateway task queue as an
 * option) and each start mode (child of the workflow loop's scheduler, client start from its claim,
 * and the client starts of the claim loop activity, SCHEDULER_LOOP=activity).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { createStack, type Stack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor, type SeedAccount } from '../../testkit/seed.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { cardWorkflowId, schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import type { Config } from '../../src/config/index.js';
import type { CheckType } from '../../src/workflow-safe/checkTypes.js';
import type { SchedulerLoop } from '../../src/workflow-safe/claimLoop.js';

interface RunShape {
  readonly workflowId: string;
  readonly events: number;
  readonly workflowTasks: number;
  readonly activityTasks: number;
  readonly markers: number;
  readonly parent: string | undefined;
  readonly claimedBy: unknown;
  readonly outcome: unknown;
}

async function shapeOf(client: Client, workflowId: string): Promise<RunShape> {
  const handle = client.workflow.getHandle(workflowId);
  const [history, description] = await Promise.all([handle.fetchHistory(), handle.describe()]);
  const events = history.events ?? [];
  const count = (key: string): number => events.filter((event) => (event as Record<string, unknown>)[key] != null).length;
  return {
    workflowId,
    events: events.length,
    workflowTasks: count('workflowTaskCompletedEventAttributes'),
    activityTasks: count('activityTaskScheduledEventAttributes'),
    markers: count('markerRecordedEventAttributes'),
    parent: description.raw.workflowExecutionInfo?.parentExecution?.workflowId ?? undefined,
    claimedBy: description.searchAttributes.ClaimedBy?.[0],
    outcome: description.searchAttributes.Outcome?.[0],
  };
}

interface AccountRuns {
  readonly account: SeedAccount;
  readonly shapes: RunShape[];
}

/**
 * One stack with an account per entry of `typeSets` (polled for those types): runs every card once
 * (intervals long enough that nothing runs twice) and returns each account's cards' runs.
 */
async function runOnce(label: string, config: Partial<Config>, typeSets: readonly (readonly CheckType[])[]): Promise<{ stack: Stack; runs: AccountRuns[] }> {
  const stack = await createStack(label, { config });
  const typeGroups = { card_status: 'main', carddata: 'main', realname: 'main' } as const;
  const accounts: SeedAccount[] = [];
  // Every type due at the same moment, so each execution runs all of them together.
  const now = Date.now();
  for (const [index, types] of typeSets.entries()) {
    const account = await seedAccount(stack, {
      name: `${label}${index + 1}`,
      qps: { main: 50 },
      typeGroups,
      cards: 6,
      intervalsSec: Object.fromEntries(types.map((t) => [t, 600])),
      carrier: { realnameControl: true },
    });
    await stack.deps.store.upsertMany(
      account.cards.map((card) => ({ carrierId: account.carrier.id, cardId: card.id, dues: Object.fromEntries(types.map((t) => [t, now])) })),
    );
    accounts.push(account);
  }
  const cards = accounts.flatMap((account) => account.cards);
  await stack.startWorkers();
  await ensurePollingControl(
    { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX },
    { reconcileEveryMs: 2000 },
  );
  await waitFor(
    'one recorded execution of every card',
    async () => {
      const { rows } = await stack.db.pool.query<{ n: string }>('SELECT count(DISTINCT card_id)::text AS n FROM card_execution');
      return Number(rows[0]?.n) === cards.length;
    },
    30_000,
  );
  // The execution row is written before the run's last workflow task (which sets `Outcome`), so
  // wait for every run to close before reading its history.
  const workflowIds = cards.map((card) => cardWorkflowId(card.id, stack.config.WORKFLOW_ID_PREFIX));
  await waitFor(
    'every card run closed',
    async () => {
      const statuses = await Promise.all(workflowIds.map(async (id) => (await stack.client.workflow.getHandle(id).describe()).status.name));
      return statuses.every((status) => status !== 'RUNNING');
    },
    30_000,
  );
  const runs: AccountRuns[] = [];
  for (const account of accounts)
    runs.push({
      account,
      shapes: await Promise.all(account.cards.map((card) => shapeOf(stack.client, cardWorkflowId(card.id, stack.config.WORKFLOW_ID_PREFIX)))),
    });
  return { stack, runs };
}

/**
 * Two accounts on one stack, one polled for one type, one for three: one type is one workflow task,
 * no activity task and ≤ 10 events, each further type one event more. A workflow loop starts the
 * runs as its children; a claim loop activity starts them with the client (no parent) and the
 * scheduler starts no child. Either way ClaimedBy names the scheduler's run.
 */
async function oneAndThreeTypes(t: TestContext, label: string, loop: SchedulerLoop): Promise<void> {
  const { stack, runs } = await runOnce(label, { SCHEDULER_LOOP: loop }, [['card_status'], ['card_status', 'carddata', 'realname']]);
  try {
    const [one, three] = runs;
    assert.ok(one && three);
    t.diagnostic(`one type: events ${one.shapes.map((s) => s.events).join(',')}; workflow tasks ${one.shapes.map((s) => s.workflowTasks).join(',')}`);
    const scheduler = schedulerWorkflowId(one.account.carrier.id, stack.config.WORKFLOW_ID_PREFIX);
    for (const shape of one.shapes) {
      assert.equal(shape.outcome, 'success', JSON.stringify(shape));
      assert.equal(shape.workflowTasks, 1, JSON.stringify(shape));
      assert.equal(shape.activityTasks, 0, JSON.stringify(shape));
      assert.ok(shape.events <= 10, JSON.stringify(shape));
      assert.equal(shape.parent, loop === 'workflow' ? scheduler : undefined);
      assert.match(String(shape.claimedBy), new RegExp(`^${scheduler}/`));
    }
    const baseline = 10;
    t.diagnostic(`three types: events ${three.shapes.map((s) => s.events).join(',')}; workflow tasks ${three.shapes.map((s) => s.workflowTasks).join(',')}`);
    for (const shape of three.shapes) {
      assert.equal(shape.outcome, 'success', JSON.stringify(shape));
      assert.equal(shape.workflowTasks, 1, JSON.stringify(shape));
      assert.equal(shape.activityTasks, 0, JSON.stringify(shape));
      assert.ok(shape.events <= baseline + 2, JSON.stringify(shape));
    }
    const { rows } = await stack.db.pool.query<{ types: string[] }>('SELECT types FROM card_execution WHERE card_id = ANY($1::bigint[])', [
      three.account.cards.map((card) => card.id),
    ]);
    assert.equal(rows.length, three.account.cards.length);
    for (const row of rows) assert.deepEqual([...row.types].sort(), ['card_status', 'carddata', 'realname']);
    if (loop === 'activity') {
      // The scheduler hands its claiming to the loop: it starts no child.
      const history = await stack.client.workflow.getHandle(scheduler).fetchHistory();
      assert.equal((history.events ?? []).filter((event) => event.startChildWorkflowExecutionInitiatedEventAttributes != null).length, 0);
    }
  } finally {
    await stack.close();
  }
}

test('card execution shape', async (t) => {
  await t.test('default (child start, local gateway steps): one type is one workflow task and ≤ 10 events; each further type adds one event', async (t) => {
    // The workflow loop's child starts (SCHEDULER_LOOP=activity starts runs with the client: the subtest below).
    await oneAndThreeTypes(t, 'shape-default', 'workflow');
  });

  await t.test('GATEWAY_STEPS=queue: steps run as activities on the gateway task queue', async (t) => {
    const { stack, runs } = await runOnce('shape-queue', { GATEWAY_STEPS: 'queue' }, [['card_status', 'carddata']]);
    const run = { stack, shapes: runs[0]?.shapes ?? [] };
    try {
      t.diagnostic(
        `two types on the gateway queue: events ${run.shapes.map((s) => s.events).join(',')}; workflow tasks ` +
          `${run.shapes.map((s) => s.workflowTasks).join(',')}`,
      );
      for (const shape of run.shapes) {
        assert.equal(shape.outcome, 'success', JSON.stringify(shape));
        assert.equal(shape.activityTasks, 2, JSON.stringify(shape));
      }
      assert.ok(((await run.stack.simulator.stats({ cards: false })).accounts['shape-queue1-gw']?.groups.main?.calls ?? 0) >= 12);
    } finally {
      await run.stack.close();
    }
  });

  await t.test('CARD_START_MODE=client: the claim activity starts runs without a parent, ClaimedBy names the scheduler run', async () => {
    // CARD_START_MODE applies to the workflow loop only (docs/design.md, 'The claim loop as an activity').
    const { stack, runs } = await runOnce('shape-client', { SCHEDULER_LOOP: 'workflow', CARD_START_MODE: 'client' }, [['card_status']]);
    const run = { stack, account: runs[0]!.account, shapes: runs[0]!.shapes };
    try {
      const scheduler = schedulerWorkflowId(run.account.carrier.id, run.stack.config.WORKFLOW_ID_PREFIX);
      const schedulerRun = await run.stack.client.workflow.getHandle(scheduler).describe();
      for (const shape of run.shapes) {
        assert.equal(shape.outcome, 'success', JSON.stringify(shape));
        assert.equal(shape.parent, undefined);
        assert.equal(shape.claimedBy, `${scheduler}/${schedulerRun.runId}`);
        assert.equal(shape.workflowTasks, 1, JSON.stringify(shape));
        assert.ok(shape.events <= 10, JSON.stringify(shape));
      }
      const history = await run.stack.client.workflow.getHandle(scheduler).fetchHistory();
      const children = (history.events ?? []).filter((event) => event.startChildWorkflowExecutionInitiatedEventAttributes != null);
      assert.equal(children.length, 0);
    } finally {
      await run.stack.close();
    }
  });
  await t.test(
    'SCHEDULER_LOOP=activity: the claim loop starts runs with the client; one type is one workflow task and ≤ 10 events; each further type adds one event',
    async (t) => {
      await oneAndThreeTypes(t, 'shape-loop', 'activity');
    },
  );
});
