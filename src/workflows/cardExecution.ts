/**
 * The execution of one claimed card — the one copy of the rules both run shapes follow
 * (docs/design.md, 'cardCheck'): `cardCheck` runs it for its one card, `cardBatch` for each
 * card it carries, concurrently. Workflow code: every step is a (local) activity.
 *
 * Redis stays the authority: the execution right is acquired from it first (under the executor id
 * the caller gives), the lease is renewed before every further gateway call, and the card is
 * finished (or released) through it.
 */
import {
  type ActivityOptions,
  type LocalActivityOptions,
  ActivityFailure,
  ApplicationFailure,
  proxyActivities,
  patched,
  proxyLocalActivities,
  workflowInfo,
} from '@temporalio/workflow';
import type { RetryPolicy } from '@temporalio/common';
import type { CardActivities } from '../activities/card.js';
import type { GatewayActivities } from '../activities/gateway.js';
import type { IngestActivities, RecordExecutionInput } from '../activities/ingest.js';
import { isGatewayCheckType, type CheckType } from '../workflow-safe/checkTypes.js';
import type { CardBookkeeping } from './bookkeepingGate.js';
import { FINISH_LASTING_PATCH, firstFinishRetry, isNonRetryable, retryLasting } from './finishRetry.js';
import type { CardCheckInput, ExecutionOutcome, ExecutionPlanRun, FinishRetrySettings, StepResult } from '../workflow-safe/cardRun.js';
import type { TaskQueueNames } from '../workflow-safe/taskQueues.js';

export interface CardExecutionInput extends CardCheckInput {
  readonly taskQueues: TaskQueueNames;
}

/** What differs between the run shapes; the rules do not. */
export interface CardExecutionContext {
  /**
   * Who holds the card's execution right in Redis (and alone may renew and finish it): the
   * `cardCheck` run's id; in a batch, `<run id>/<card id>`, one executor per card of the run.
   */
  readonly executorId: string;
  /**
   * Names the card on each of its activities (the SDK's `summary`), so a batch run's timeline says
   * whose step each one is; the gateway steps add their type. Absent in `cardCheck` (one card per run).
   */
  readonly summary?: string;
  /**
   * Where the card's bookkeeping calls go: absent, its own local activities (`cardCheck`: the
   * commands exactly as before); in a batch, the run's gate, which sends the calls of all its cards
   * made at the same point as one local activity (src/workflows/bookkeepingGate.ts).
   */
  readonly bookkeeping?: CardBookkeeping;
}

export interface CardExecutionResult {
  readonly outcome: ExecutionOutcome;
  /** The types the execution ran (set once a plan to run was made): `cardCheck`'s `CheckTypes`. */
  readonly types?: readonly CheckType[];
}

/** Short, bounded retries: Redis/PostgreSQL bookkeeping is cheap and must eventually land. */
const BOOKKEEPING_RETRY = { initialInterval: '200 ms', backoffCoefficient: 2, maximumInterval: '5 s', maximumAttempts: 20 } as const;

/** The summary option when there is one (none: the options, and so the commands, exactly as before). */
const summarized = (summary: string | undefined): Pick<LocalActivityOptions, 'summary'> => (summary === undefined ? {} : { summary });

/**
 * Redis bookkeeping runs as local activities: in the card worker itself, recorded in history as
 * markers, without a server round trip per step (they would otherwise be activity tasks on the card task queue).
 */
function cardBookkeeping(summary: string | undefined) {
  return proxyLocalActivities<CardActivities & IngestActivities>({
    startToCloseTimeout: '10 s',
    localRetryThreshold: '2 s',
    retry: BOOKKEEPING_RETRY,
    ...summarized(summary),
  });
}

/**
 * The durable records are written after the claim is finished in Redis, so waiting for them holds
 * no card and blocks no other: they are retried without limit (PostgreSQL away for an hour is an
 * hour of waiting, not a lost execution), backing off to one attempt a minute.
 */
const RECORD_RETRY = { initialInterval: '1 s', backoffCoefficient: 2, maximumInterval: '1 minute' } as const;

/**
 * Sync ingest: this worker writes the record to PostgreSQL. Async ingest: it hands the record to
 * the ingest stream in Redis (one XADD) and the run ends; the ingest workers write it in batches
 * across executions. Both are local activities: no task and one marker event either way.
 */
export function recordWriters(summary: string | undefined): Pick<IngestActivities, 'recordExecution' | 'enqueueRecord'> {
  return proxyLocalActivities<IngestActivities>({
    startToCloseTimeout: '30 s',
    localRetryThreshold: '10 s',
    retry: RECORD_RETRY,
    ...summarized(summary),
  });
}

/** A card's own finish with the given retry (the short one: the same commands as the rest of its bookkeeping). */
function ownFinish(summary: string | undefined, retry: RetryPolicy): Pick<CardActivities, 'finishExecution'> {
  return proxyLocalActivities<CardActivities>({ startToCloseTimeout: '10 s', localRetryThreshold: '2 s', retry, ...summarized(summary) });
}

/** The finish retried by the lasting policy; undefined when even that gave up. */
function finishLasting(
  summary: string | undefined,
  settings: FinishRetrySettings | undefined,
  input: Parameters<CardActivities['finishExecution']>[0],
): Promise<Awaited<ReturnType<CardActivities['finishExecution']>> | undefined> {
  const finish = ownFinish(summary, firstFinishRetry(settings));
  return retryLasting(() => finish.finishExecution(input), settings);
}

/** A card's own local activities for its bookkeeping (cardCheck; each a marker of its own). */
function ownBookkeeping(summary: string | undefined): CardBookkeeping {
  const card = cardBookkeeping(summary);
  const records = recordWriters(summary);
  return {
    prepareExecution: card.prepareExecution,
    releaseClaim: card.releaseClaim,
    finishNotPolled: card.finishNotPolled,
    finishExecution: card.finishExecution,
    recordExecution: records.recordExecution,
    enqueueRecord: records.enqueueRecord,
  };
}

/**
 * Runs one claimed card: exec right and plan, the due gateway steps (step and total timeouts,
 * retries), finish in Redis, the durable record. Returns how it ended. Throws only when something
 * unexpected fails: after the steps' part, the claim was given back first; from finish on, the
 * claim is left to its lease, whose expiry makes the card due again.
 */
export async function executeCard(input: CardExecutionInput, context: CardExecutionContext): Promise<CardExecutionResult> {
  const card = context.bookkeeping ?? ownBookkeeping(context.summary);
  // Sync ingest: this worker writes the record to PostgreSQL; async: it goes to the ingest stream.
  const records: Record<'sync' | 'async', (record: RecordExecutionInput) => Promise<unknown>> = {
    sync: (record) => card.recordExecution(record),
    async: (record) => card.enqueueRecord(record),
  };
  const info = workflowInfo();
  const startedAt = Date.now();
  // From the claim (or the run's creation) to this first workflow task: both on the server's clock.
  const startLagMs = startedAt - (input.claimedAt ?? info.startTime.getTime());
  // The wait in the engine's queue, what every account on it shares. A run started with the client:
  // from its creation to this first task (the start lag also holds the claim activity's start
  // calls, more for a larger account's round). A child: from the claim, its start went through its
  // scheduler's history, the account's own queue (overload bench, child mode: start lag 1.7 / 2.7 /
  // 3.7 s for budgets 1 : 2 : 4 on a queue lag of 0.4 s for all).
  const queueLagMs = info.parent === undefined ? startedAt - info.startTime.getTime() : startLagMs;

  let plan: Awaited<ReturnType<CardActivities['prepareExecution']>>;
  try {
    plan = await card.prepareExecution({
      carrierId: input.carrierId,
      cardId: input.cardId,
      token: input.token,
      executorId: context.executorId,
      fromPriority: input.fromPriority,
      startLagMs,
      queueLagMs,
      ...(input.dueHorizonMs === undefined ? {} : { dueHorizonMs: input.dueHorizonMs }),
    });
  } catch {
    // Nothing ran yet: give the card back at once (it is claimed again when it can be prepared)
    // instead of failing the run and leaving the claim to its lease.
    await card.releaseClaim({ carrierId: input.carrierId, cardId: input.cardId, token: input.token }).catch(() => false);
    return { outcome: 'unprepared' };
  }
  if (plan.kind === 'lost' || plan.kind === 'busy') return { outcome: 'lost' };
  if (plan.kind === 'finished') {
    // A replay: this run's finish landed before its worker died, ahead of the workflow task that
    // carried it. Nothing runs again; what the check learned is recorded from the finish.
    const { kind: _, ...finished } = plan;
    await records[plan.plan.ingestMode]({
      ...finished,
      carrierId: input.carrierId,
      cardId: input.cardId,
      token: input.token,
      fromPriority: input.fromPriority,
      workflowId: info.workflowId,
      runId: info.runId,
    });
    return { outcome: plan.outcome, types: plan.plan.types };
  }
  if (plan.kind === 'not_polled') {
    await card.finishNotPolled({ carrierId: input.carrierId, cardId: input.cardId, token: input.token, reason: plan.reason, fromPriority: input.fromPriority });
    return { outcome: 'not_polled' };
  }
  let ran: StepsRun;
  try {
    ran = await runSteps(input, context, plan, startedAt);
  } catch (error) {
    // Anything unexpected before finish: give the card back at once instead of waiting for the lease.
    await card.releaseClaim({ carrierId: input.carrierId, cardId: input.cardId, token: input.token });
    throw error;
  }

  const finishInput = {
    carrierId: input.carrierId,
    cardId: input.cardId,
    token: input.token,
    plan,
    results: ran.results,
    startedAt,
    fromPriority: input.fromPriority,
    workflowId: info.workflowId,
    runId: info.runId,
  };
  if (ran.leaseLost) {
    // The claim is someone else's now, but the steps that finished still count: what they learned
    // (ok:t, which request-check cooldowns read; failure streaks) goes through finish's stale path,
    // which releases nothing and moves no due later; the record keeps their observations.
    const completed =
      ran.results.length > 0
        ? await card.finishExecution({ ...finishInput, leaseLost: true }).catch((error: unknown) => {
            // Redis away: the record still lands, without what finish would have added to it.
            if (!patched(FINISH_LASTING_PATCH)) throw error;
            return undefined;
          })
        : undefined;
    await records[plan.ingestMode]({
      ...finishInput,
      results: completed?.results ?? [],
      outcome: 'lease_lost',
      owned: false,
      typeFinishes: completed?.typeFinishes ?? [],
    });
    return { outcome: 'lease_lost', types: plan.types };
  }

  let finished: Awaited<ReturnType<CardBookkeeping['finishExecution']>>;
  try {
    finished = await (context.bookkeeping ?? ownFinish(context.summary, firstFinishRetry(plan.finishRetry))).finishExecution(finishInput);
  } catch (error) {
    // Redis away for longer than the short policy. A history recorded before failed here.
    if (!patched(FINISH_LASTING_PATCH)) throw error;
    // A batch's gate has already tried its lasting policy (src/workflows/bookkeepingGate.ts).
    const lasting = context.bookkeeping || isNonRetryable(error) ? undefined : await finishLasting(context.summary, plan.finishRetry, finishInput);
    if (lasting === undefined) {
      // The finish could not land: the steps' results are recorded all the same; the lease ran
      // out, so whoever owns the card by then claims it again.
      await records[plan.ingestMode]({ ...finishInput, results: ran.results, outcome: 'lease_lost', owned: false, typeFinishes: [] });
      return { outcome: 'lease_lost', types: plan.types };
    }
    finished = lasting;
  }
  // Durable records (observations, execution, alerts, priority item): written by this worker in
  // sync ingest mode, handed to the ingest stream in async mode.
  const record = { ...finishInput, results: finished.results, outcome: finished.outcome, owned: finished.owned, typeFinishes: finished.typeFinishes };
  await records[plan.ingestMode](record);
  return { outcome: finished.outcome, types: plan.types };
}

/** The steps' results in order; `leaseLost`: the lease was gone before the next step, which did not run. */
interface StepsRun {
  readonly results: StepResult[];
  readonly leaseLost: boolean;
}

async function runSteps(input: CardExecutionInput, context: CardExecutionContext, plan: ExecutionPlanRun, startedAt: number): Promise<StepsRun> {
  const executionDeadline = startedAt + plan.totalTimeoutMs;
  const results: StepResult[] = [];
  for (const type of plan.types) {
    if (type === 'package') continue; // evaluated locally by finish, once per execution
    if (!isGatewayCheckType(type)) continue;
    const now = Date.now();
    if (now >= executionDeadline) {
      results.push({ type, outcome: 'skipped', reason: 'total_timeout' });
      continue;
    }
    const deadlineMs = Math.min(now + plan.stepTimeoutMs, executionDeadline);
    try {
      // The gateway activity renews the lease right before its call and reports a lost one.
      const result = await gatewayStepRunner(input, plan, context.summary === undefined ? undefined : `${context.summary}: ${type}`).checkGateway({
        carrierId: input.carrierId,
        cardId: input.cardId,
        token: input.token,
        executorId: context.executorId,
        leaseMs: plan.leaseMs,
        gatewayAccount: plan.gatewayAccount,
        iccid: plan.iccid,
        type,
        group: plan.typeGroups[type],
        deadlineMs,
      });
      // Stop before the call; the steps that completed are returned with the loss.
      if (result === 'lease_lost') return { results, leaseLost: true };
      results.push(result);
    } catch (error) {
      // A step's unexpected exception is that step's failure, not the execution's.
      results.push({ type, outcome: 'failure', errorClass: failureClass(error), message: failureMessage(error), gatewayMs: Date.now() - now });
    }
  }
  return { results, leaseLost: false };
}

/**
 * Gateway steps as local activities of the card worker (default: no task and one marker event per
 * step; a workflow task that outlives its timeout is heartbeated by the SDK), or as activities on
 * the gateway task queue for deployments that run gateway callers elsewhere. A proxy per step
 * costs nothing (it issues no command) and carries the step's own summary.
 */
function gatewayStepRunner(input: CardExecutionInput, plan: ExecutionPlanRun, summary: string | undefined): GatewayActivities {
  const options: ActivityOptions = {
    // Limiter wait + call must fit the step; a little slack for the activity's own overhead.
    startToCloseTimeout: plan.stepTimeoutMs + 2000,
    // Classified outcomes come back as values; only transient errors are thrown, retried once.
    retry: { maximumAttempts: 2, initialInterval: '200 ms', nonRetryableErrorTypes: ['permanent', 'invalid_response'] },
    ...summarized(summary),
  };
  return plan.gatewaySteps === 'queue'
    ? proxyActivities<GatewayActivities>({ ...options, taskQueue: input.taskQueues.gateway })
    : proxyLocalActivities<GatewayActivities>(options);
}

/**
 * The failure class a gateway step reported (the ApplicationFailure type thrown by the activity),
 * found along the cause chain: a regular activity wraps it in an ActivityFailure, and a local
 * activity's failure may arrive wrapped differently.
 */
function failureClass(error: unknown): string {
  for (let cause: unknown = error, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth += 1) {
    if (cause instanceof ApplicationFailure && cause.type) return cause.type;
    if (cause.name === 'ApplicationFailure' && typeof (cause as { type?: unknown }).type === 'string') return (cause as { type: string }).type;
    if (cause.name === 'TimeoutFailure') return 'timeout';
  }
  if (error instanceof ActivityFailure) return 'timeout';
  return 'unexpected';
}

function failureMessage(error: unknown): string {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  return (cause instanceof Error ? cause.message : String(cause)).slice(0, 500);
}
