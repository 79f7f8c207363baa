/**
 * What one card check costs Temporal, in either run shape (CARD_RUN_SHAPE): the card runs' events,
 * workflow tasks and actions (bench/lib/actions.ts) from a sample of completed runs of the window,
 * divided by the checks each run recorded (one in `card`, up to CARD_BATCH_SIZE in `batch`), plus
 * the schedulers' share: every event of every scheduler run inside the window (continue-as-new
 * included) divided by the checks started in it. The scheduler's ticks (a timer and the claim's
 * local activity each second, whether or not anything is due) are also given per account and
 * second, the figure a capacity model multiplies by accounts rather than by checks.
 */
import { schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import type { BenchStack } from './stack.js';
import type { RunShape } from './options.js';
import { addCounts, countEvents, emptyCounts, eventsInWindow, fetchEvents, perUnit, type EventCounts } from './actions.js';
import { executionsBetween } from './measure.js';
import type { Pool } from '../../src/db/pool.js';
import { round, sleep } from './stats.js';

/** Card runs whose histories are read per measurement. */
export const RUN_SAMPLE = 20;
/** Scheduler actions that recur every tick of every account, load or not. */
export const TICK_ACTION_KINDS: readonly string[] = ['timer started', 'local activities (one per workflow task)', 'workflow task heartbeat'];

/** settledExecutionsBetween: the count must stay the same this long (a batch records its cards as they finish, over seconds). */
const SETTLE_STABLE_MS = 3000;
const SETTLE_MAX_MS = 30_000;

/**
 * Executions that started in [from, to), once the runs still going at `to` have recorded them: a
 * row is written when its execution ends, seconds after it started in a long batch, so a count
 * taken right at the window's end misses them. Read until it has not grown for a few seconds.
 */
export async function settledExecutionsBetween(pool: Pool, from: Date, to: Date): Promise<number> {
  let last = await executionsBetween(pool, from, to);
  let stableSince = Date.now();
  const until = Date.now() + SETTLE_MAX_MS;
  while (Date.now() < until && Date.now() - stableSince < SETTLE_STABLE_MS) {
    await sleep(1000);
    const n = await executionsBetween(pool, from, to);
    if (n !== last) {
      last = n;
      stableSince = Date.now();
    }
  }
  return last;
}

export interface CheckCost {
  readonly runShape: RunShape;
  /** Completed runs read (runs still going are skipped: their history is partial). */
  readonly runsSampled: number;
  readonly runsIncomplete: number;
  /** Checks (card_execution rows) the sampled runs recorded. */
  readonly checks: number;
  readonly checksPerRun: number;
  /** Mean over the sampled runs. */
  readonly perRun: EventCounts;
  /** The card runs' share per check. */
  readonly runPerCheck: EventCounts;
  /** The schedulers' events in the window ÷ checks started in it. */
  readonly schedulerPerCheck: EventCounts;
  /** The schedulers' tick actions (TICK_ACTION_KINDS) per account and second of the window. */
  readonly schedulerTickActionsPerAccountSecond: number;
  /** Scheduler runs that had events in the window (1 + continue-as-new rollovers). */
  readonly schedulerRuns: number;
  /** runPerCheck + schedulerPerCheck. */
  readonly perCheck: EventCounts;
}

interface SampledRun {
  readonly workflowId: string;
  readonly runId: string;
  readonly checks: number;
}

/**
 * Runs of the window. `card`: successful runs that ran `types` types (each one check, the shape the
 * throughput workload asks for). `batch`: any run that recorded a check in the window, with every
 * check it recorded (its cards' types vary).
 */
async function sampleRuns(stack: BenchStack, runShape: RunShape, from: Date, to: Date, types: number): Promise<SampledRun[]> {
  if (runShape === 'card') {
    const { rows } = await stack.pool.query<{ workflow_id: string; run_id: string }>(
      `SELECT workflow_id, run_id FROM card_execution
        WHERE started_at >= $1 AND started_at < $2 AND outcome = 'success' AND cardinality(types) = $3
        ORDER BY random() LIMIT $4`,
      [from, to, types, RUN_SAMPLE],
    );
    return rows.map((row) => ({ workflowId: row.workflow_id, runId: row.run_id, checks: 1 }));
  }
  const { rows } = await stack.pool.query<{ workflow_id: string; run_id: string }>(
    `SELECT workflow_id, run_id FROM card_execution WHERE started_at >= $1 AND started_at < $2
      GROUP BY workflow_id, run_id ORDER BY random() LIMIT $3`,
    [from, to, RUN_SAMPLE],
  );
  // Every check of those runs, also those recorded just outside the window (a batch straddling its edge).
  const counted = await stack.pool.query<{ workflow_id: string; run_id: string; n: string }>(
    `SELECT workflow_id, run_id, count(*)::text AS n FROM card_execution
      WHERE workflow_id = ANY($1::text[]) AND run_id = ANY($2::text[]) GROUP BY 1, 2`,
    [rows.map((row) => row.workflow_id), rows.map((row) => row.run_id)],
  );
  const checks = new Map(counted.rows.map((row) => [`${row.workflow_id}/${row.run_id}`, Number(row.n)]));
  return rows.map((row) => ({ workflowId: row.workflow_id, runId: row.run_id, checks: checks.get(`${row.workflow_id}/${row.run_id}`) ?? 0 }));
}

export async function measureCheckCost(
  stack: BenchStack,
  spec: { readonly runShape: RunShape; readonly types: number; readonly carrierIds: readonly string[] },
  from: Date,
  to: Date,
): Promise<CheckCost> {
  const runs = await sampleRuns(stack, spec.runShape, from, to, spec.types);
  const total = emptyCounts();
  let sampled = 0;
  let incomplete = 0;
  let checks = 0;
  for (const run of runs) {
    const events = await fetchEvents(stack.client.workflow.getHandle(run.workflowId, run.runId));
    if (!events.at(-1)?.workflowExecutionCompletedEventAttributes) {
      incomplete += 1;
      continue;
    }
    sampled += 1;
    checks += run.checks;
    countEvents(events, total);
  }
  const scheduler = emptyCounts();
  let schedulerRuns = 0;
  for (const carrierId of spec.carrierIds) {
    const events = await eventsInWindow(stack.client, schedulerWorkflowId(carrierId, stack.ref.workflowIdPrefix), from, to);
    schedulerRuns += events.filter((event) => event.workflowExecutionStartedEventAttributes).length + 1;
    countEvents(events, scheduler);
  }
  const executions = await executionsBetween(stack.pool, from, to);
  const seconds = (to.getTime() - from.getTime()) / 1000;
  const tickActions = TICK_ACTION_KINDS.reduce((n, kind) => n + (scheduler.actionsByKind[kind] ?? 0), 0);
  const runPerCheck = perUnit(total, checks);
  const schedulerPerCheck = perUnit(scheduler, executions);
  return {
    runShape: spec.runShape,
    runsSampled: sampled,
    runsIncomplete: incomplete,
    checks,
    checksPerRun: sampled > 0 ? round(checks / sampled, 2) : 0,
    perRun: perUnit(total, sampled),
    runPerCheck,
    schedulerPerCheck,
    schedulerTickActionsPerAccountSecond: spec.carrierIds.length > 0 && seconds > 0 ? round(tickActions / (spec.carrierIds.length * seconds), 3) : 0,
    schedulerRuns,
    perCheck: addCounts(runPerCheck, schedulerPerCheck),
  };
}
