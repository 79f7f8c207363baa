/** Execution records and a card to hang them on, for the ingest tests (not a test file itself). */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { insertCards } from '../../src/db/cards.js';
import type { CheckType } from '../../src/workflow-safe/checkTypes.js';
import type { ExecutionOutcome, StepResult } from '../../src/workflow-safe/cardRun.js';
import type { TypeFinish } from '../../src/domain/finishPlan.js';
import { toIngestRecord, type IngestRecord } from '../../src/ingest/record.js';
import { iccid, makeCarrier } from '../db/fixtures.js';

let cardCounter = 0;

export async function makeCard(pool: pg.Pool, carrierId?: string): Promise<{ cardId: string; carrierId: string }> {
  const carrier = carrierId ?? (await makeCarrier(pool, `ingest-${randomUUID().slice(0, 8)}`)).id;
  cardCounter += 1;
  const [card] = await insertCards(pool, [
    { iccid: iccid(900_000 + cardCounter), msisdn: null, carrierId: carrier, status: 'active', enablePolling: true, deviceId: null, standalone: true },
  ]);
  return { cardId: card!.id, carrierId: carrier };
}

export interface StepSpec {
  readonly type: Exclude<CheckType, 'package'>;
  readonly outcome: 'success' | 'failure';
  readonly payload?: Record<string, unknown>;
  readonly failBefore?: number;
  readonly failAfter?: number;
  /** The carrier's date (ms) of the state the step saw. */
  readonly changedAt?: number;
}

/** One execution of the card at `at` (ms) with the given steps; ids unique unless `runId` is given. */
export function makeRecord(
  card: { cardId: string; carrierId: string },
  at: number,
  steps: readonly StepSpec[],
  options: { runId?: string; priorityItemId?: string } = {},
): IngestRecord {
  const runId = options.runId ?? randomUUID();
  const results: StepResult[] = steps.map((step) =>
    step.outcome === 'success'
      ? {
          type: step.type,
          outcome: 'success',
          gatewayMs: 7,
          observation: {
            collectionId: `obs-${runId}-${step.type}`,
            observedAt: new Date(at).toISOString(),
            payload: step.payload ?? {},
            ...(step.changedAt === undefined ? {} : { changedAt: new Date(step.changedAt).toISOString() }),
          },
        }
      : { type: step.type, outcome: 'failure', errorClass: 'transient', message: 'gateway unreachable', gatewayMs: 9 },
  );
  const typeFinishes: TypeFinish[] = steps.map((step) => ({
    type: step.type,
    outcome: step.outcome,
    failBefore: step.failBefore ?? 0,
    failAfter: step.failAfter ?? (step.outcome === 'failure' ? (step.failBefore ?? 0) + 1 : 0),
    firstFailedAt: step.outcome === 'failure' ? at - 1000 * (step.failBefore ?? 0) : null,
    nextDue: at + 60_000,
    confirmationMissed: false,
    confirmed: false,
  }));
  const outcome: ExecutionOutcome = steps.every((s) => s.outcome === 'success')
    ? 'success'
    : steps.every((s) => s.outcome === 'failure')
      ? 'failure'
      : 'partial';
  return toIngestRecord(
    {
      carrierId: card.carrierId,
      cardId: card.cardId,
      token: `tok-${runId}`,
      plan: {
        kind: 'run',
        iccid: '89860000000000000001',
        gatewayAccount: 'gw',
        types: steps.map((s) => s.type),
        typeGroups: {},
        stepTimeoutMs: 3000,
        totalTimeoutMs: 10_000,
        leaseMs: 20_000,
        earliestDue: at - 100,
        intervalsMs: {},
        ingestMode: 'async',
        gatewaySteps: 'local',
        ...(options.priorityItemId === undefined ? {} : { priorityItemId: options.priorityItemId }),
      },
      results,
      startedAt: at - 50,
      fromPriority: false,
      workflowId: `card-${card.cardId}`,
      runId,
      outcome,
      owned: true,
      typeFinishes,
    },
    at,
  );
}
