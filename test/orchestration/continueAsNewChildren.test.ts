/**
 * continueAsNew of carrierScheduler in child start mode while its children keep completing: an
 * abandoned child still reports its completion to the run that started it, and a completion that
 * arrives while that run's task continues as new makes the server refuse the task
 * (UNHANDLED_COMMAND). Each refusal evicted the run and replayed its whole history; under load
 * the scheduler stopped claiming for most of a minute. The scheduler must roll over without a
 * single failed or timed-out workflow task, every round of its last phase still claiming.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import proto from '@temporalio/proto';

const { temporal } = proto;
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';

const EventType = temporal.api.enums.v1.EventType;
type EventTypeValue = proto.temporal.api.enums.v1.EventType;
/** Runs of the scheduler to see: three continue-as-new with children in flight. */
const RUNS_WANTED = 4;

test('orchestration: carrierScheduler continues-as-new with child completions arriving, without a failed workflow task', async (t) => {
  const stack = await createStack('orch-can-children', { config: { CARD_START_MODE: 'child' } });
  try {
    // 30 cards every 2 s: ~15 children a second, each completing within a second or two, so
    // completions are arriving whenever the run decides to roll over.
    const account = await seedAccount(stack, {
      name: 'canc1',
      qps: { main: 100 },
      typeGroups: { card_status: 'main' },
      cards: 30,
      intervalsSec: { card_status: 2 },
    });
    await stack.startWorkers();
    const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    // A few hundred events: a continue-as-new every several seconds at this load.
    await ensurePollingControl(ref, { scheduler: { maxHistoryEvents: 300 } });
    const schedulerId = schedulerWorkflowId(account.carrier.id, ref.workflowIdPrefix);
    const scheduler = stack.client.workflow.getHandle(schedulerId);
    const runIds: string[] = [];
    await waitFor(
      `${RUNS_WANTED} scheduler runs`,
      async () => {
        const runId = (await scheduler.describe().catch(() => undefined))?.runId;
        if (runId !== undefined && runId !== runIds[runIds.length - 1]) runIds.push(runId);
        return runIds.length >= RUNS_WANTED;
      },
      240_000,
      100,
    );
    // The closed runs (all but the current one): what each did and how its tasks went.
    const report: string[] = [];
    let failedTasks = 0;
    let unreported = 0;
    for (const runId of runIds.slice(0, -1)) {
      const history = await stack.client.workflow.getHandle(schedulerId, runId).fetchHistory();
      const events = history.events ?? [];
      const count = (type: EventTypeValue): number => events.filter((e) => e.eventType === type).length;
      const failed = count(EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED);
      const timedOut = count(EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT);
      const children = count(EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED);
      const completions = count(EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED);
      // A start the server refused (an earlier run of the card still running) leaves no child;
      // a child that failed, timed out, was cancelled or terminated has reported its end too.
      const notStarted = count(EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED);
      const otherEnds =
        count(EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED) +
        count(EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT) +
        count(EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED) +
        count(EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED);
      const causes = events
        .filter((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED)
        .map((e) => temporal.api.enums.v1.WorkflowTaskFailedCause[e.workflowTaskFailedEventAttributes?.cause ?? 0]);
      report.push(
        `run ${runId.slice(0, 8)}: ${events.length} events, ${children} children started (${notStarted} refused), ${completions} completions, ` +
          `${otherEnds} other ends, ` +
          `${failed} failed tasks ${JSON.stringify(causes)}, ${timedOut} timed out`,
      );
      failedTasks += failed + timedOut;
      // The decision that keeps completions from meeting the rollover: every child the run
      // started had reported its completion before the run continued as new.
      unreported += children - notStarted - completions - otherEnds;
      // The test exercises what it claims to: children were started and completed in the run,
      // and the run ended by continuing as new.
      assert.ok(children > 0 && completions > 0, `run ${runId} started and saw children complete`);
      assert.equal(events[events.length - 1]?.eventType, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, `run ${runId} continued as new`);
    }
    for (const line of report) t.diagnostic(line);
    assert.equal(failedTasks, 0, `failed or timed-out workflow tasks in the scheduler's runs:\n${report.join('\n')}`);
    assert.equal(unreported, 0, `children still running when their scheduler run continued as new:\n${report.join('\n')}`);
  } finally {
    await stack.close();
  }
});
