/**
 * cardBatch: one run carrying up to CARD_BATCH_SIZE claimed cards (CARD_RUN_SHAPE=batch): of one
 * account's claim round, or (SCHEDULER_LOOP=activity) of several accounts' rounds, a shared batch.
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

/** One account's cards in a shared batch, with its claim round's instant and due horizon. */
export interface CardBatchPart {
  readonly carrierId: string;
  readonly cards: readonly ClaimedCard[];
  readonly claimedAt?: number;
  readonly dueHorizonMs?: number;
}

export interface CardBatchArgs {
  /** The account of `cards` (in a shared batch: of its first part). */
  readonly carrierId: string;
  readonly cards: readonly ClaimedCard[];
  /**
   * A shared batch (SCHEDULER_LOOP=activity): cards of several accounts' claim rounds, each part
   * with its own account, instant and horizon; `cards` and the fields beside it are then unused.
   */
  readonly parts?: readonly CardBatchPart[];
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

/** The batch's parts: its own, or the one its single account's fields make. */
const partsOf = (args: CardBatchArgs): readonly CardBatchPart[] =>
  args.parts ?? [
    {
      carrierId: args.carrierId,
      cards: args.cards,
      ...(args.claimedAt === undefined ? {} : { claimedAt: args.claimedAt }),
      ...(args.dueHorizonMs === undefined ? {} : { dueHorizonMs: args.dueHorizonMs }),
    },
  ];

export async function cardBatch(args: CardBatchArgs): Promise<{ outcomes: Record<string, number> }> {
  const { runId } = workflowInfo();
  const outcomes: Record<string, number> = {};
  const cards = partsOf(args).flatMap((part) => part.cards.map((card) => ({ part, card })));
  // The cards' bookkeeping calls made at the same point go out together (one marker, not one per card).
  const gate = new BookkeepingGate(cards.length);
  await Promise.all(
    cards.map(async ({ part, card }) => {
      let outcome: CardBatchOutcome;
      try {
        ({ outcome } = await executeCard(
          {
            carrierId: part.carrierId,
            cardId: card.cardId,
            token: card.token,
            fromPriority: card.fromPriority,
            ...(part.claimedAt === undefined ? {} : { claimedAt: part.claimedAt }),
            ...(part.dueHorizonMs === undefined ? {} : { dueHorizonMs: part.dueHorizonMs }),
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
