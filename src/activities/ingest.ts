/**
 * Activities of the `polling-ingest` task queue: the durable record of one execution in
 * PostgreSQL (sync ingest, DESIGN §7): observations with out-of-order protection, the execution
 * row, failure alerts opened/recovered, the priority item's transition. Every write is idempotent
 * (unique keys + ON CONFLICT), so a retried activity lands on the same rows.
 */
import type { Pool } from '../db/pool.js';
import { insertObservations, type Observation } from '../db/observations.js';
import { recordExecution as insertExecution, type ExecutionOutcome as StoredOutcome } from '../db/executions.js';
import { recordFailure, recoverFailures } from '../db/alerts.js';
import type { ExecutionOutcome, FinishInput, StepResult } from '../common/orchestration.js';
import type { TypeFinish } from './finishPlan.js';
import type { PriorityTransitions } from './priorityTransitions.js';

export interface IngestActivityDeps {
  readonly pool: Pool;
  readonly priority: PriorityTransitions;
}

export interface RecordExecutionInput extends Omit<FinishInput, 'results'> {
  readonly results: readonly StepResult[];
  readonly outcome: ExecutionOutcome;
  readonly owned: boolean;
  readonly failCounts: readonly TypeFinish[];
}

const STORED_OUTCOME: Record<ExecutionOutcome, StoredOutcome> = {
  success: 'success',
  partial: 'partial',
  failure: 'failed',
  deferred: 'deferred',
  lost: 'aborted',
  not_polled: 'aborted',
  lease_lost: 'aborted',
  unprepared: 'aborted',
};

function observationsOf(input: RecordExecutionInput): Observation[] {
  const observations: Observation[] = [];
  for (const result of input.results) {
    if (result.outcome !== 'success' || !result.observation) continue;
    observations.push({
      observationId: result.observation.collectionId,
      cardId: input.cardId,
      carrierId: input.carrierId,
      type: result.type,
      observedAt: new Date(result.observation.observedAt),
      payload: result.observation.payload,
    });
  }
  return observations;
}

export function createIngestActivities(deps: IngestActivityDeps) {
  return {
    async recordExecution(input: RecordExecutionInput): Promise<{ executionId: string; alertsOpened: number; alertsRecovered: number }> {
      await insertObservations(deps.pool, observationsOf(input));
      const gatewayMs = input.results.reduce((sum, r) => sum + ('gatewayMs' in r ? r.gatewayMs : 0), 0);
      const executionId = await insertExecution(deps.pool, {
        cardId: input.cardId,
        carrierId: input.carrierId,
        startedAt: new Date(input.startedAt),
        finishedAt: new Date(),
        types: input.plan.types,
        outcome: STORED_OUTCOME[input.outcome],
        gatewayMs,
        workflowId: input.workflowId,
        runId: input.runId,
        fromPriority: input.fromPriority,
        details: {
          latenessMs: Math.max(0, input.startedAt - input.plan.earliestDue),
          owned: input.owned,
          steps: input.results.map((r) => ({ type: r.type, outcome: r.outcome, ...('errorClass' in r ? { errorClass: r.errorClass, message: r.message } : {}), ...('reason' in r ? { reason: r.reason } : {}) })),
          confirmations: input.failCounts.filter((t) => t.confirmed || t.confirmationMissed).map((t) => ({ type: t.type, reached: t.confirmed })),
        },
      });
      // Recover only what may be open: a type that had a failure streak before this success.
      const recovered = input.failCounts.filter((t) => t.outcome === 'success' && t.failBefore > 0).map((t) => ({ cardId: input.cardId, type: t.type }));
      const alertsRecovered = await recoverFailures(deps.pool, recovered);
      let alertsOpened = 0;
      for (const type of input.failCounts) {
        if (type.outcome !== 'failure') continue;
        const result = input.results.find((r) => r.type === type.type);
        const error = result?.outcome === 'failure' ? `${result.errorClass}|${result.message}` : 'unknown';
        const recorded = await recordFailure(deps.pool, { cardId: input.cardId, carrierId: input.carrierId, type: type.type, failCount: type.failAfter, error });
        if (recorded.opened) alertsOpened += 1;
      }
      await deps.priority.executionFinished(input);
      return { executionId, alertsOpened, alertsRecovered };
    },
  };
}

export type IngestActivities = ReturnType<typeof createIngestActivities>;
