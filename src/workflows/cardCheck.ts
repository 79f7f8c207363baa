/**
 * cardCheck(cardId, token, fromPriority): one execution of one card.
 *
 * Workflow id `card-<cardId>`, so the Web UI lists every execution of a card under one id and
 * Temporal refuses a second concurrent run. Redis stays the authority: the execution right is
 * acquired from it first, the lease is renewed before every further gateway call, and the card is
 * finished (or released) through it.
 */
import {
  type ActivityOptions,
  ActivityFailure,
  ApplicationFailure,
  proxyActivities,
  proxyLocalActivities,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { CardActivities } from '../activities/card.js';
import type { GatewayActivities } from '../activities/gateway.js';
import type { IngestActivities, RecordExecutionInput } from '../activities/ingest.js';
import { isGatewayCheckType } from '../common/checkTypes.js';
import {
  CHECK_TYPES_ATTRIBUTE,
  OUTCOME_ATTRIBUTE,
  type CardCheckInput,
  type ExecutionOutcome,
  type ExecutionPlanRun,
  type StepResult,
  type TaskQueueNames,
  typeFinishesOf,
} from '../common/orchestration.js';

export interface CardCheckArgs extends CardCheckInput {
  readonly taskQueues: TaskQueueNames;
}

/** Short, bounded retries: Redis/PostgreSQL bookkeeping is cheap and must eventually land. */
const BOOKKEEPING_RETRY = { initialInterval: '200 ms', backoffCoefficient: 2, maximumInterval: '5 s', maximumAttempts: 20 } as const;

/**
 * Redis bookkeeping runs as local activities: in the card worker itself, recorded in history as
 * markers, without a server round trip per step (they would otherwise be activity tasks on the card task queue).
 */
function cardBookkeeping() {
  return proxyLocalActivities<CardActivities & IngestActivities>({ startToCloseTimeout: '10 s', localRetryThreshold: '2 s', retry: BOOKKEEPING_RETRY });
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
function recordWriters(): Record<'sync' | 'async', (record: RecordExecutionInput) => Promise<unknown>> {
  const local = proxyLocalActivities<IngestActivities>({ startToCloseTimeout: '30 s', localRetryThreshold: '10 s', retry: RECORD_RETRY });
  return {
    sync: (record) => local.recordExecution(record),
    async: (record) => local.enqueueRecord(record),
  };
}

export async function cardCheck(args: CardCheckArgs): Promise<{ outcome: ExecutionOutcome }> {
  const card = cardBookkeeping();
  const records = recordWriters();
  const info = workflowInfo();
  const startedAt = Date.now();
  // From the claim (or the run's creation) to this first workflow task: both on the server's clock.
  const startLagMs = startedAt - (args.claimedAt ?? info.startTime.getTime());

  let plan: Awaited<ReturnType<CardActivities['prepareExecution']>>;
  try {
    plan = await card.prepareExecution({
      carrierId: args.carrierId,
      cardId: args.cardId,
      token: args.token,
      executorId: info.runId,
      fromPriority: args.fromPriority,
      startLagMs,
      ...(args.dueHorizonMs === undefined ? {} : { dueHorizonMs: args.dueHorizonMs }),
    });
  } catch {
    // Nothing ran yet: give the card back at once (it is claimed again when it can be prepared)
    // instead of failing the run and leaving the claim to its lease.
    await card.releaseClaim({ carrierId: args.carrierId, cardId: args.cardId, token: args.token }).catch(() => false);
    upsertSearchAttributes([{ key: OUTCOME_ATTRIBUTE, value: 'unprepared' }]);
    return { outcome: 'unprepared' };
  }
  if (plan.kind === 'lost' || plan.kind === 'busy') {
    upsertSearchAttributes([{ key: OUTCOME_ATTRIBUTE, value: 'lost' }]);
    return { outcome: 'lost' };
  }
  if (plan.kind === 'not_polled') {
    await card.finishNotPolled({ carrierId: args.carrierId, cardId: args.cardId, token: args.token, reason: plan.reason, fromPriority: args.fromPriority });
    upsertSearchAttributes([{ key: OUTCOME_ATTRIBUTE, value: 'not_polled' }]);
    return { outcome: 'not_polled' };
  }
  let ran: StepsRun;
  try {
    ran = await runSteps(args, plan, startedAt);
  } catch (error) {
    // Anything unexpected before finish: give the card back at once instead of waiting for the lease.
    await card.releaseClaim({ carrierId: args.carrierId, cardId: args.cardId, token: args.token });
    throw error;
  }

  const finishInput = {
    carrierId: args.carrierId,
    cardId: args.cardId,
    token: args.token,
    plan,
    results: ran.results,
    startedAt,
    fromPriority: args.fromPriority,
    workflowId: info.workflowId,
    runId: info.runId,
  };
  if (ran.leaseLost) {
    // The claim is someone else's now, but the steps that finished still count: what they learned
    // (ok:t, which request-check cooldowns read; failure streaks) goes through finish's stale path,
    // which releases nothing and moves no due later; the record keeps their observations.
    const completed = ran.results.length > 0 ? await card.finishExecution({ ...finishInput, leaseLost: true }) : undefined;
    await records[plan.ingestMode]({
      ...finishInput,
      results: completed?.results ?? [],
      outcome: 'lease_lost',
      owned: false,
      typeFinishes: (completed && typeFinishesOf(completed)) ?? [],
    });
    upsertSearchAttributes([
      { key: CHECK_TYPES_ATTRIBUTE, value: [...plan.types] },
      { key: OUTCOME_ATTRIBUTE, value: 'lease_lost' },
    ]);
    return { outcome: 'lease_lost' };
  }

  const finished = await card.finishExecution(finishInput);
  // typeFinishesOf: a result recorded in this run's history before the rename names them `failCounts`.
  // Durable records (observations, execution, alerts, priority item): written by this worker in
  // sync ingest mode, handed to the ingest stream in async mode.
  const record = { ...finishInput, results: finished.results, outcome: finished.outcome, owned: finished.owned, typeFinishes: typeFinishesOf(finished) ?? [] };
  await records[plan.ingestMode](record);
  // One event for both attributes: the types run and how it ended.
  upsertSearchAttributes([
    { key: CHECK_TYPES_ATTRIBUTE, value: [...plan.types] },
    { key: OUTCOME_ATTRIBUTE, value: finished.outcome },
  ]);
  return { outcome: finished.outcome };
}

/** The steps' results in order; `leaseLost`: the lease was gone before the next step, which did not run. */
interface StepsRun {
  readonly results: StepResult[];
  readonly leaseLost: boolean;
}

async function runSteps(args: CardCheckArgs, plan: ExecutionPlanRun, startedAt: number): Promise<StepsRun> {
  const gateway = gatewayStepRunner(args, plan);
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
      const result = await gateway.checkGateway({
        carrierId: args.carrierId,
        cardId: args.cardId,
        token: args.token,
        executorId: workflowInfo().runId,
        execValue: workflowInfo().runId,
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
 * the gateway task queue for deployments that run gateway callers elsewhere.
 */
function gatewayStepRunner(args: CardCheckArgs, plan: ExecutionPlanRun): GatewayActivities {
  const options: ActivityOptions = {
    // Limiter wait + call must fit the step; a little slack for the activity's own overhead.
    startToCloseTimeout: plan.stepTimeoutMs + 2000,
    // Classified outcomes come back as values; only transient errors are thrown, retried once.
    retry: { maximumAttempts: 2, initialInterval: '200 ms', nonRetryableErrorTypes: ['permanent', 'invalid_response'] },
  };
  return plan.gatewaySteps === 'queue'
    ? proxyActivities<GatewayActivities>({ ...options, taskQueue: args.taskQueues.gateway })
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
