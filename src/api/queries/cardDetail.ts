/**
 * The card detail: the card plus what Redis knows (due times, failure streaks), open
 * failure alerts, recent executions newest first (each with its run's Web UI page), and the
 * Temporal Web UI link listing every run.
 */
import { listFailureAlerts, type FailureAlert } from '../../db/alerts.js';
import { getCard } from '../../db/cards.js';
import { listExecutions } from '../../db/executions.js';
import { CHECK_TYPES, type CheckType } from '../../workflow-safe/checkTypes.js';
import type { CardRunShape } from '../../workflow-safe/cardBatches.js';
import { cardRunsQuery } from '../../workflow-safe/searchAttributes.js';
import type { ScopedCard } from '../../domain/card.js';
import type { ApiContext } from '../context.js';

/** Executions shown in the detail; older ones are in the Web UI. */
export const DETAIL_EXECUTIONS = 20;

export interface TypeFailure {
  readonly count: number;
  readonly firstFailedAt?: number;
  readonly lastError?: string;
}

export interface CardDetail extends ScopedCard {
  readonly due: Partial<Record<CheckType, number>>;
  readonly failures: Partial<Record<CheckType, TypeFailure>>;
  readonly alerts: FailureAlert[];
  readonly executions: {
    startedAt: Date;
    finishedAt?: Date;
    types: readonly CheckType[];
    outcome: string;
    gatewayMs: number;
    workflowId: string;
    runId: string;
    /** The run in the Temporal Web UI (a cardCheck run, or the cardBatch run that carried the card). */
    runUrl: string;
    fromPriority?: boolean;
  }[];
  readonly temporalUiUrl: string;
}

/**
 * Web UI list of every execution of the card: found by its CardId search attribute (cardCheck
 * runs), or in the batch shape by the CardIds of the cardBatch runs that carried it.
 */
export function temporalUiUrl(baseUrl: string, namespace: string, cardId: string, runShape: CardRunShape = 'card'): string {
  const base = baseUrl.replace(/\/+$/, '');
  return `${base}/namespaces/${encodeURIComponent(namespace)}/workflows?query=${encodeURIComponent(cardRunsQuery(cardId, runShape))}`;
}

/** One run's page in the Web UI. */
export function runUiUrl(baseUrl: string, namespace: string, workflowId: string, runId: string): string {
  const base = baseUrl.replace(/\/+$/, '');
  return `${base}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}/${encodeURIComponent(runId)}/history`;
}

export async function cardDetail(ctx: ApiContext, id: string): Promise<CardDetail> {
  const { pool, store } = ctx.deps;
  const card = await getCard(pool, id);
  const [state, alerts, executions] = await Promise.all([
    store.readDue(card.carrierId, card.id),
    listFailureAlerts(pool, { cardId: card.id, openOnly: true }),
    listExecutions(pool, card.id, DETAIL_EXECUTIONS),
  ]);
  const due: Partial<Record<CheckType, number>> = {};
  const failures: Partial<Record<CheckType, TypeFailure>> = {};
  for (const type of CHECK_TYPES) {
    const typeState = state?.types[type];
    if (!typeState) continue;
    if (typeState.due !== null) due[type] = typeState.due;
    if (typeState.fail > 0) {
      failures[type] = {
        count: typeState.fail,
        ...(typeState.ffail === null ? {} : { firstFailedAt: typeState.ffail }),
        ...(typeState.err === null ? {} : { lastError: typeState.err }),
      };
    }
  }
  return {
    ...card,
    due,
    failures,
    alerts,
    executions: executions.map((execution) => ({
      startedAt: execution.startedAt,
      ...(execution.finishedAt === undefined ? {} : { finishedAt: execution.finishedAt }),
      types: execution.types,
      outcome: execution.outcome,
      gatewayMs: execution.gatewayMs,
      workflowId: execution.workflowId,
      runId: execution.runId,
      runUrl: runUiUrl(ctx.config.TEMPORAL_UI_URL, ctx.config.TEMPORAL_NAMESPACE, execution.workflowId, execution.runId),
      ...(execution.fromPriority === undefined ? {} : { fromPriority: execution.fromPriority }),
    })),
    temporalUiUrl: temporalUiUrl(ctx.config.TEMPORAL_UI_URL, ctx.config.TEMPORAL_NAMESPACE, card.id, ctx.config.CARD_RUN_SHAPE),
  };
}
