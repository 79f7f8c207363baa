/**
 * Starts claimed cards' runs with the Temporal client, from the claim activity
 * (CARD_START_MODE=client). Same workflow ids, task queue and search
 * attributes as the child starts of carrierScheduler, plus ClaimedBy naming the scheduler run.
 *
 * CARD_RUN_SHAPE=card: one `cardCheck` per card. A start that finds a run already there is a
 * success when that run carries this claim's token (a retried claim activity started it before),
 * and otherwise waits (briefly) for that older execution of the card to close and starts again; one
 * still running then is a failure, and this claim is released at once instead of waiting for its lease.
 *
 * CARD_RUN_SHAPE=batch: the round's cards in `cardBatch` runs (priority batches first), each named
 * by the round's token prefix and its position. A start that finds its batch already there (a
 * retried claim activity) is a success for the cards that batch carries.
 */
import { randomUUID } from 'node:crypto';
import { eachLimited } from '../runtime/eachLimited.js';
import { WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy, type Client } from '@temporalio/client';
import { cardRunPlacement } from '../workflow-safe/taskQueues.js';
import {
  CARD_IDS_ATTRIBUTE,
  CARD_ID_ATTRIBUTE,
  CARRIER_ID_ATTRIBUTE,
  CLAIMED_BY_ATTRIBUTE,
  cardIdsSearchAttribute,
} from '../workflow-safe/searchAttributes.js';
import { cardBatchWorkflowId, cardWorkflowId } from '../workflow-safe/workflowIds.js';
import type { CardRunPlacement, ClaimedCard } from '../workflow-safe/claimRound.js';
import { cardBatches, priorityFirst, type CardBatch, type CardRunShape } from '../workflow-safe/cardBatches.js';
import type { CardCheckArgs } from '../workflows/cardCheck.js';
import type { CardBatchArgs } from '../workflows/cardBatch.js';

/** Concurrent start calls per round: enough to hide the round trip, few enough not to flood the frontend. */
const START_CONCURRENCY = 32;
/**
 * Longest a start that found the card's previous run still open (its claim finished, its record
 * being written) waits for it to close before it tries once more, instead of releasing the claim
 * for FAILED_START_RETRY_MS (15 s). Short: the claim stays held meanwhile (the round itself waits
 * at most START_WAIT_MS of src/activities/control.ts for its starts).
 */
const PREVIOUS_RUN_CLOSE_MAX_MS = 2_000;
const PREVIOUS_RUN_POLL_MS = 200;

export interface CardStartRequest {
  readonly carrierId: string;
  readonly cards: readonly ClaimedCard[];
  readonly placement: CardRunPlacement;
  /** The claim round's instant (scheduler workflow time), passed to the run as `claimedAt`. */
  readonly roundAt?: number;
  /** The round's due horizon, passed to the run. */
  readonly dueHorizonMs?: number;
  /**
   * The round's token prefix (`<scheduler run id>.<round>`): names its `cardBatch` runs, so a
   * retried start finds the batch it started before. Required in the batch shape.
   */
  readonly tokenPrefix?: string;
}

export interface CardStarter {
  /** Starts every card's run; returns the cards whose run could not be started (their claims are still held). */
  start(request: CardStartRequest): Promise<ClaimedCard[]>;
}

/** CARD_RUN_SHAPE and CARD_BATCH_SIZE. */
export interface CardRunShaping {
  readonly runShape: CardRunShape;
  readonly batchSize: number;
}

type Log = (message: string, fields: Record<string, unknown>) => void;

export function createClientCardStarter(client: Client, log: Log, shaping: CardRunShaping = { runShape: 'card', batchSize: 1 }): CardStarter {
  const startOne = async (request: CardStartRequest, card: ClaimedCard, waitedForPrevious = false): Promise<boolean> => {
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
        ...cardRunPlacement(request.placement.taskQueues, card.fromPriority),
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
      if (error instanceof WorkflowExecutionAlreadyStartedError) {
        if ((await runningToken(client, workflowId)) === card.token) return true;
        // Usually the card's previous run, its claim finished, still writing its record: started
        // again once it has closed, rather than released and retried FAILED_START_RETRY_MS later.
        if (!waitedForPrevious && (await closedWithin(client, workflowId, PREVIOUS_RUN_CLOSE_MAX_MS))) return startOne(request, card, true);
      }
      log('cardCheck could not start; releasing its claim', { cardId: card.cardId, token: card.token, error: String(error) });
      return false;
    }
  };
  if (shaping.runShape === 'batch') return { start: (request) => startBatches(client, log, shaping.batchSize, request) };
  return {
    async start(request) {
      const failed: ClaimedCard[] = [];
      await eachLimited(priorityFirst(request.cards), START_CONCURRENCY, async (card) => {
        if (!(await startOne(request, card))) failed.push(card);
      });
      return failed;
    },
  };
}

/** What became of one batch's start: its cards that are not in a run (after a conflict, or all of them when it failed). */
interface BatchStart {
  readonly failed: readonly ClaimedCard[];
  /** Cards of this batch that the run already under its id does not carry (a retried round cut differently). */
  readonly unplaced: readonly ClaimedCard[];
}

async function startBatches(client: Client, log: Log, batchSize: number, request: CardStartRequest): Promise<ClaimedCard[]> {
  const { tokenPrefix } = request;
  if (tokenPrefix === undefined) {
    log('cardBatch runs need the round token prefix; releasing the claims', { carrierId: request.carrierId, cards: request.cards.length });
    return [...request.cards];
  }
  const startAll = async (batches: readonly CardBatch[], roundName: string): Promise<BatchStart> => {
    const failed: ClaimedCard[] = [];
    const unplaced: ClaimedCard[] = [];
    await eachLimited(batches, START_CONCURRENCY, async (batch) => {
      const result = await startBatch(
        client,
        log,
        request,
        batch,
        cardBatchWorkflowId(request.carrierId, roundName, batch.index, request.placement.workflowIdPrefix),
      );
      failed.push(...result.failed);
      unplaced.push(...result.unplaced);
    });
    return { failed, unplaced };
  };
  // In cut order: the priority lane's batches first.
  const first = await startAll(cardBatches(request.cards, batchSize), tokenPrefix);
  if (first.unplaced.length === 0) return [...first.failed];
  // A retried claim hands its claims back in another order (and all as normal-lane ones), so its
  // batches differ from the first attempt's: cards a batch under the same id does not carry may
  // run in another of them, or in none (a start the first attempt did not make). Started again in
  // batches of their own: a card already running is refused by its exec right ('busy', no call).
  const again = await startAll(cardBatches(first.unplaced, batchSize), `${tokenPrefix}.again-${randomUUID()}`);
  return [...first.failed, ...again.failed, ...again.unplaced];
}

async function startBatch(client: Client, log: Log, request: CardStartRequest, batch: CardBatch, workflowId: string): Promise<BatchStart> {
  const args: CardBatchArgs = {
    carrierId: request.carrierId,
    cards: batch.cards,
    fromPriority: batch.fromPriority,
    ...(request.roundAt === undefined ? {} : { claimedAt: request.roundAt }),
    ...(request.dueHorizonMs ? { dueHorizonMs: request.dueHorizonMs } : {}),
    taskQueues: request.placement.taskQueues,
  };
  try {
    await client.workflow.start('cardBatch', {
      workflowId,
      ...cardRunPlacement(request.placement.taskQueues, batch.fromPriority),
      args: [args],
      // The id is unique per round and position: a run under it, even a finished one, was started
      // by an earlier attempt of this round, and must not be started twice.
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      typedSearchAttributes: [
        cardIdsSearchAttribute(batch.cards),
        { key: CARRIER_ID_ATTRIBUTE, value: request.carrierId },
        { key: CLAIMED_BY_ATTRIBUTE, value: request.placement.claimedBy },
      ],
    });
    return { failed: [], unplaced: [] };
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) {
      const carried = await carriedCardIds(client, workflowId);
      if (carried !== undefined) return { failed: [], unplaced: batch.cards.filter((card) => !carried.has(card.cardId)) };
    }
    log('cardBatch could not start; releasing its claims', { workflowId, cards: batch.cards.map((card) => card.cardId), error: String(error) });
    return { failed: batch.cards, unplaced: [] };
  }
}

/** Whether the run under `workflowId` is closed within `maxMs` (polled; false when it cannot be described). */
async function closedWithin(client: Client, workflowId: string, maxMs: number): Promise<boolean> {
  const until = Date.now() + maxMs;
  for (;;) {
    try {
      if ((await client.workflow.getHandle(workflowId).describe()).status.name !== 'RUNNING') return true;
    } catch {
      return false;
    }
    if (Date.now() + PREVIOUS_RUN_POLL_MS > until) return false;
    await new Promise((resolve) => setTimeout(resolve, PREVIOUS_RUN_POLL_MS));
  }
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

/** The card ids a batch run carries (its CardIds); undefined when it cannot be described. */
async function carriedCardIds(client: Client, workflowId: string): Promise<Set<string> | undefined> {
  try {
    const description = await client.workflow.getHandle(workflowId).describe();
    return new Set(description.typedSearchAttributes.get(CARD_IDS_ATTRIBUTE) ?? []);
  } catch {
    return undefined;
  }
}
