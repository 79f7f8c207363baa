/**
 * The search attributes the workflows carry, which make a card's runs findable in the Web UI, and
 * the list queries that read them. Workflow-safe.
 */
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';
import type { CardRunShape } from './cardBatches.js';
import type { ClaimedCard } from './claimRound.js';

/** Search attributes that make a card's executions findable in the Web UI. */
export const CARD_ID_ATTRIBUTE = defineSearchAttributeKey('CardId', SearchAttributeType.KEYWORD);
export const CARRIER_ID_ATTRIBUTE = defineSearchAttributeKey('CarrierId', SearchAttributeType.KEYWORD);
export const CHECK_TYPES_ATTRIBUTE = defineSearchAttributeKey('CheckTypes', SearchAttributeType.KEYWORD_LIST);
export const OUTCOME_ATTRIBUTE = defineSearchAttributeKey('Outcome', SearchAttributeType.KEYWORD);
/** `<scheduler workflow id>/<run id>` of the carrierScheduler run whose claim started the card run. */
export const CLAIMED_BY_ATTRIBUTE = defineSearchAttributeKey('ClaimedBy', SearchAttributeType.KEYWORD);
/**
 * Every card a `cardBatch` run carries, given at its start (free: no upsert): the Web UI query
 * `CardIds = "42"` lists the batch runs that checked card 42, as `CardId = "42"` lists its `cardCheck` runs.
 */
export const CARD_IDS_ATTRIBUTE = defineSearchAttributeKey('CardIds', SearchAttributeType.KEYWORD_LIST);

/**
 * The Web UI list query of a card's runs in a run shape (CARD_RUN_SHAPE): its `cardCheck` runs
 * carry `CardId`, the `cardBatch` runs that carried it list it in `CardIds`.
 */
export const cardRunsQuery = (cardId: string, runShape: CardRunShape): string => (runShape === 'batch' ? `CardIds="${cardId}"` : `CardId="${cardId}"`);

/** The `CardIds` search attribute of a batch run carrying `cards`. */
export const cardIdsSearchAttribute = (cards: readonly Pick<ClaimedCard, 'cardId'>[]): SearchAttributePair => ({
  key: CARD_IDS_ATTRIBUTE,
  value: cards.map((card) => card.cardId),
});
