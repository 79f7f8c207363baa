/**
 * The batched run shape (CARD_RUN_SHAPE=batch): how one claim round's cards are cut into
 * `cardBatch` runs. Pure and workflow-safe: the scheduler (child starts) and the claim activity
 * (client starts) cut the same way (and name the runs alike: `cardBatchWorkflowId`, workflowIds.ts).
 */
import type { ClaimedCard } from './claimRound.js';

/** `card`: one `cardCheck` run per card (workflow id `card-<id>`); `batch`: `cardBatch` runs of up to CARD_BATCH_SIZE cards. */
export type CardRunShape = 'card' | 'batch';
export const CARD_RUN_SHAPES: readonly CardRunShape[] = ['card', 'batch'];
/** CARD_BATCH_SIZE when unset. */
export const DEFAULT_CARD_BATCH_SIZE = 50;
/**
 * Most cards one `cardBatch` run may carry: Temporal refuses a search attribute value over 2 KB
 * (`limit.searchAttributesSizeBytes`), and `CardIds` lists them all; 90 ids of 19 digits (the largest
 * bigint) are 1981 bytes of JSON.
 */
export const MAX_CARD_BATCH_SIZE = 90;

export interface CardBatch {
  /** Position of the batch in its round (0-based): part of its workflow id. */
  readonly index: number;
  /** Every card of a batch comes from the same lane: priority batches run on the priority queue. */
  readonly fromPriority: boolean;
  readonly cards: readonly ClaimedCard[];
}

/**
 * The round's cards in batches of at most `size`, priority cards in batches of their own and
 * first (they are started first), each lane in claim order.
 */
/**
 * The cards of a round with the priority lane's first, each lane in claim order. A claim lists the
 * priority cards it took past the in-flight limit last (its third pass): started in claim order,
 * a request-check's run would wait for the round's other starts.
 */
export function priorityFirst(cards: readonly ClaimedCard[]): ClaimedCard[] {
  return [...cards.filter((card) => card.fromPriority), ...cards.filter((card) => !card.fromPriority)];
}

export function cardBatches(cards: readonly ClaimedCard[], size: number): CardBatch[] {
  if (!Number.isInteger(size) || size < 1) throw new RangeError(`batch size must be a positive integer, got ${size}`);
  const batches: CardBatch[] = [];
  for (const fromPriority of [true, false]) {
    const lane = cards.filter((card) => card.fromPriority === fromPriority);
    for (let start = 0; start < lane.length; start += size) {
      batches.push({ index: batches.length, fromPriority, cards: lane.slice(start, start + size) });
    }
  }
  return batches;
}
