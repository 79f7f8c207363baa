/**
 * The batched run shape (CARD_RUN_SHAPE=batch): how one claim round's cards are cut into
 * `cardBatch` runs. Pure and workflow-safe: the scheduler (child starts) and the claim activity
 * (client starts) cut the same way and name the runs the same way.
 */
import type { ClaimedCard } from './orchestration.js';

/** `card`: one `cardCheck` run per card (workflow id `card-<id>`); `batch`: `cardBatch` runs of up to CARD_BATCH_SIZE cards. */
export type CardRunShape = 'card' | 'batch';
export const CARD_RUN_SHAPES: readonly CardRunShape[] = ['card', 'batch'];
/** CARD_BATCH_SIZE when unset. */
export const DEFAULT_CARD_BATCH_SIZE = 50;

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

/**
 * A batch run's workflow id: the round's token prefix (`<scheduler run id>.<round>`) and the batch's
 * position make it unique and deterministic, so a retried start finds the run it started before.
 */
export const cardBatchWorkflowId = (carrierId: string, tokenPrefix: string, index: number, prefix = ''): string =>
  `${prefix}card-batch-${carrierId}-${tokenPrefix}-${index}`;
