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

/** A search attribute's type as the Temporal CLI names it (`--type KeywordList`). */
const CLI_TYPE_NAMES = { [SearchAttributeType.KEYWORD]: 'Keyword', [SearchAttributeType.KEYWORD_LIST]: 'KeywordList' } as const;
export type SearchAttributeTypeName = (typeof CLI_TYPE_NAMES)[keyof typeof CLI_TYPE_NAMES];

/**
 * Every custom search attribute the workflows set, name → type: a namespace must have them all
 * registered, or the server refuses the runs that set them. The development stacks register them
 * (devstack/), and `scripts/temporalSetup.ts` on an existing namespace.
 */
export const SEARCH_ATTRIBUTES: Readonly<Record<string, SearchAttributeTypeName>> = Object.fromEntries(
  [CARD_ID_ATTRIBUTE, CARRIER_ID_ATTRIBUTE, CHECK_TYPES_ATTRIBUTE, OUTCOME_ATTRIBUTE, CLAIMED_BY_ATTRIBUTE, CARD_IDS_ATTRIBUTE].map((key) => [
    key.name,
    CLI_TYPE_NAMES[key.type],
  ]),
);

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
