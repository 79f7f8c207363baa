/**
 * The dashboard's card search: one box takes an ICCID or a card id and answers the card's id with
 * its Temporal Web UI addresses. The card detail itself comes from `GET /v1/cards/:id`.
 */
import { findCardByIccid, findCards } from '../db/cards.js';
import { cardWorkflowId } from '../common/orchestration.js';
import type { Queryable } from '../db/queryable.js';
import { runUrlPrefix, workflowListUrl } from './temporalLinks.js';

export interface CardLookup {
  readonly cardId: string;
  readonly iccid: string;
  readonly carrierId: string;
  readonly workflowId: string;
  /** Every execution of the card in the Web UI. */
  readonly workflowsUrl: string;
  /** Append `<runId>/history` for one execution. */
  readonly runUrlPrefix: string;
}

export interface LookupSettings {
  readonly temporalUiUrl: string;
  readonly namespace: string;
  readonly workflowIdPrefix: string;
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
  return {
    cardId: card.id,
    iccid: card.iccid,
    carrierId: card.carrierId,
    workflowId,
    workflowsUrl: workflowListUrl(settings.temporalUiUrl, settings.namespace, workflowId),
    runUrlPrefix: runUrlPrefix(settings.temporalUiUrl, settings.namespace, workflowId),
  };
}
