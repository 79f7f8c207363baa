/**
 * The dashboard's card search: one box takes an ICCID or a card id and answers the card's id with
 * its Temporal Web UI addresses. The card detail itself comes from `GET /v1/cards/:id`.
 */
import { findCardByIccid, findCards } from '../db/cards.js';
import { cardRunsQuery } from '../workflow-safe/searchAttributes.js';
import { cardWorkflowId } from '../workflow-safe/workflowIds.js';
import type { CardRunShape } from '../workflow-safe/cardBatches.js';
import type { Queryable } from '../db/queryable.js';
import { runUrlPrefix, workflowListUrl, workflowQueryUrl } from './temporalLinks.js';

export interface CardLookup {
  readonly cardId: string;
  readonly iccid: string;
  readonly carrierId: string;
  /** The card's own workflow id (`card-<id>`: its cardCheck runs). */
  readonly workflowId: string;
  /**
   * Every execution of the card in the Web UI: its cardCheck runs, or (CARD_RUN_SHAPE=batch) the
   * cardBatch runs that carried it.
   */
  readonly workflowsUrl: string;
  /** The Web UI query behind workflowsUrl (`WorkflowId="card-42"`, or `CardIds="42"` in the batch shape). */
  readonly workflowsQuery: string;
  /** Append `<runId>/history` for one cardCheck execution (a batch execution's page is its `runUrl` in the card detail). */
  readonly runUrlPrefix: string;
}

export interface LookupSettings {
  readonly temporalUiUrl: string;
  readonly namespace: string;
  readonly workflowIdPrefix: string;
  /** CARD_RUN_SHAPE: which runs carry the card's executions (default `card`). */
  readonly runShape?: CardRunShape;
}

const ICCID = /^[0-9]{17,21}[0-9A-Fa-f]$/;
const CARD_ID = /^[1-9][0-9]{0,18}$/;

/** ICCIDs first (the number people have at hand); a short number is a card id. Null when neither matches. */
export async function lookupCard(db: Queryable, settings: LookupSettings, query: string): Promise<CardLookup | null> {
  const text = query.trim();
  let card = ICCID.test(text) ? await findCardByIccid(db, text) : null;
  if (card === null && CARD_ID.test(text)) card = (await findCards(db, [text]))[0] ?? null;
  if (card === null) return null;
  const workflowId = cardWorkflowId(card.id, settings.workflowIdPrefix);
  const batch = settings.runShape === 'batch';
  const workflowsQuery = batch ? cardRunsQuery(card.id, 'batch') : `WorkflowId="${workflowId}"`;
  return {
    cardId: card.id,
    iccid: card.iccid,
    carrierId: card.carrierId,
    workflowId,
    workflowsUrl: batch
      ? workflowQueryUrl(settings.temporalUiUrl, settings.namespace, workflowsQuery)
      : workflowListUrl(settings.temporalUiUrl, settings.namespace, workflowId),
    workflowsQuery,
    runUrlPrefix: runUrlPrefix(settings.temporalUiUrl, settings.namespace, workflowId),
  };
}
