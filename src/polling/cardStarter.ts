/**
 * Starts claimed cards' `cardCheck` runs with the Temporal client, from the claim activity
 * (CARD_START_MODE=client). Same workflow ids, task queue and search
 * attributes as the child starts of carrierScheduler, plus ClaimedBy naming the scheduler run.
 *
 * A start that finds a run already there is a success when that run carries this claim's token
 * (a retried claim activity started it before), and a failure otherwise: an older execution of the
 * card still runs, so this claim is released at once instead of waiting for its lease.
 */
import { WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy, type Client } from '@temporalio/client';
import {
  cardTaskQueue,
  CARD_ID_ATTRIBUTE,
  CARRIER_ID_ATTRIBUTE,
  CLAIMED_BY_ATTRIBUTE,
  cardWorkflowId,
  type CardRunPlacement,
  type ClaimedCard,
} from '../common/orchestration.js';
import type { CardCheckArgs } from '../workflows/cardCheck.js';

/** Concurrent start calls per round: enough to hide the round trip, few enough not to flood the frontend. */
const START_CONCURRENCY = 32;

export interface CardStartRequest {
  readonly carrierId: string;
  readonly cards: readonly ClaimedCard[];
  readonly placement: CardRunPlacement;
  /** The claim round's instant (scheduler workflow time), passed to the run as `claimedAt`. */
  readonly roundAt?: number;
  /** The round's due horizon, passed to the run. */
  readonly dueHorizonMs?: number;
}

export interface CardStarter {
  /** Starts every card's run; returns the cards whose run could not be started (their claims are still held). */
  start(request: CardStartRequest): Promise<ClaimedCard[]>;
}

export function createClientCardStarter(client: Client, log: (message: string, fields: Record<string, unknown>) => void): CardStarter {
  const startOne = async (request: CardStartRequest, card: ClaimedCard): Promise<boolean> => {
    const workflowId = cardWorkflowId(card.cardId, request.placement.workflowIdPrefix);
    const args: CardCheckArgs = {
      carrierId: request.carrierId,
      cardId: card.cardId,
      token: card.token,
      fromPriority: card.fromPriority,
      ...(request.roundAt === undefined ? {} : { claimedAt: request.roundAt }),
      ...(request.dueHorizonMs ? { dueHorizonMs: request.dueHorizonMs } : {}),
      taskQueues: request.placement.taskQueues,
    };
    try {
      await client.workflow.start('cardCheck', {
        workflowId,
        taskQueue: cardTaskQueue(request.placement.taskQueues, card.fromPriority),
        args: [args],
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
        memo: { token: card.token },
        typedSearchAttributes: [
          { key: CARD_ID_ATTRIBUTE, value: card.cardId },
          { key: CARRIER_ID_ATTRIBUTE, value: request.carrierId },
          { key: CLAIMED_BY_ATTRIBUTE, value: request.placement.claimedBy },
        ],
      });
      return true;
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError && (await runningToken(client, workflowId)) === card.token) return true;
      log('cardCheck could not start; releasing its claim', { cardId: card.cardId, token: card.token, error: String(error) });
      return false;
    }
  };
  return {
    async start(request) {
      const failed: ClaimedCard[] = [];
      let next = 0;
      const lane = async (): Promise<void> => {
        for (let index = next++; index < request.cards.length; index = next++) {
          const card = request.cards[index];
          if (card && !(await startOne(request, card))) failed.push(card);
        }
      };
      await Promise.all(Array.from({ length: Math.min(START_CONCURRENCY, request.cards.length) }, lane));
      return failed;
    },
  };
}

/** The claim token of the card's running execution, from its memo; undefined when unknown. */
async function runningToken(client: Client, workflowId: string): Promise<string | undefined> {
  try {
    const description = await client.workflow.getHandle(workflowId).describe();
    const token = description.memo?.token;
    return typeof token === 'string' ? token : undefined;
  } catch {
    return undefined;
  }
}
