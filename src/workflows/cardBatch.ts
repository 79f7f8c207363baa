/**
 * cardBatch: one run carrying up to CARD_BATCH_SIZE claimed cards of one account (CARD_RUN_SHAPE=batch).
 *
 * Every card goes through `executeCard`, exactly as in `cardCheck`, all cards at once: their local
 * activities run concurrently, so a batch usually completes in one or two workflow tasks, and the
 * run's fixed cost (start, workflow tasks, completion) is paid once for all of them
 * (docs/design.md, 'The batched run shape: cardBatch').
 *
 * Each card is its own executor in Redis (`<run id>/<card id>`): Redis exec rights, not the workflow
 * id, keep one executor per card across batches, shapes and a rolling switch between them. One
 * card's failure, timeout or lost lease touches that card only; the batch succeeds.
 *
 * Started with the `CardIds` search attribute (every card it carries, given at start: no upsert)
 * by carrierScheduler (child start) or the claim activity (client start).
 */
import { log, workflowInfo } from '@temporalio/workflow';
import type { ClaimedCard } from '../workflow-safe/claimRound.js';
import type { ExecutionOutcome } from '../workflow-safe/cardRun.js';
import type { TaskQueueNames } from '../workflow-safe/taskQueues.js';
import { executeCard } from './cardExecution.js';
import { BookkeepingGate } from './bookkeepingGate.js';

export interface CardBatchArgs {
  readonly carrierId: string;
  readonly cards: readonly ClaimedCard[];
  /** The batch's lane (every card of it comes from the same one): priority batches run on the priority queue. */
  readonly fromPriority: boolean;
  /** The claim round's instant (server clock): each card's start lag counts from here. */
  readonly claimedAt?: number;
  /** The claim's due horizon: types due up to this long after a card's preparation run in it. */
  readonly dueHorizonMs?: number;
  readonly taskQueues: TaskQueueNames;
}

/** How a card of a batch ended: an execution outcome, or `failed` when its execution threw. */
export type CardBatchOutcome = ExecutionOutcome | 'failed';

export async function cardBatch(args: CardBatchArgs): Promise<{ outcomes: Record<string, number> }> {
  const { runId } = workflowInfo();
  const outcomes: Record<string, number> = {};
  // The cards' bookkeeping calls made at the same point go out together (one marker, not one per card).
  const gate = new BookkeepingGate(args.cards.length);
  await Promise.all(
    args.cards.map(async (card) => {
      let outcome: CardBatchOutcome;
      try {
        ({ outcome } = await executeCard(
          {
            carrierId: args.carrierId,
            cardId: card.cardId,
            token: card.token,
            fromPriority: card.fromPriority,
            ...(args.claimedAt === undefined ? {} : { claimedAt: args.claimedAt }),
            ...(args.dueHorizonMs === undefined ? {} : { dueHorizonMs: args.dueHorizonMs }),
            taskQueues: args.taskQueues,
          },
          { executorId: `${runId}/${card.cardId}`, summary: `card ${card.cardId}`, bookkeeping: gate.port(card.cardId) },
        ));
      } catch (error) {
        // What fails a cardCheck run fails this card only. A failure in its steps' part already
        // gave its claim back; one from finish on leaves it to its lease, as in cardCheck.
        log.warn('card execution failed in its batch', { cardId: card.cardId, token: card.token, error: String(error) });
        outcome = 'failed';
      } finally {
        gate.leave();
      }
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    }),
  );
  return { outcomes };
}
