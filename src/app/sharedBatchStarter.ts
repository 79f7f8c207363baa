/**
 * Shared batches (SCHEDULER_LOOP=activity, CARD_RUN_SHAPE=batch; docs/design.md, 'Shared batches'):
 * the cards that the claim loops of one process claim within a short window travel in the same
 * `cardBatch` runs, whatever their account. A small account's round holds a card or two; in runs
 * of its own each paid a whole run's cost (start, workflow tasks, completion) for them.
 *
 * Budget and limits stay per account: each claim already kept to its account's budget and
 * in-flight limit in Redis, and each gateway call waits for its account's limiter. A batch names
 * every card it carries in `CardIds`; `CarrierId` and `ClaimedBy` only when one account's round
 * fills it alone.
 *
 * A request with cards from the priority lane starts at once, with whatever waits beside it; the
 * others wait at most the window, or until a batch is full.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowIdReusePolicy, type Client } from '@temporalio/client';
import type { SearchAttributePair } from '@temporalio/common';
import { cardRunPlacement } from '../workflow-safe/taskQueues.js';
import { CARRIER_ID_ATTRIBUTE, CLAIMED_BY_ATTRIBUTE, cardIdsSearchAttribute } from '../workflow-safe/searchAttributes.js';
import { cardBatchWorkflowId } from '../workflow-safe/workflowIds.js';
import type { ClaimedCard } from '../workflow-safe/claimRound.js';
import type { CardBatchArgs, CardBatchPart } from '../workflows/cardBatch.js';
import type { CardStarter, CardStartRequest } from './cardStarter.js';

/** Longest a claimed card waits for others to share its run: well inside a claim round's wait for its starts (START_WAIT_MS). */
export const SHARED_BATCH_WINDOW_MS = 250;

type Log = (message: string, fields: Record<string, unknown>) => void;

interface Waiting {
  readonly request: CardStartRequest;
  /** Settles with the cards whose run could not start. */
  readonly settle: (failed: ClaimedCard[]) => void;
}

/** One account's cards of one lane in one batch, and whose request they came from. */
interface Slice {
  readonly waiting: Waiting;
  readonly cards: readonly ClaimedCard[];
}

export interface SharedBatchOptions {
  readonly batchSize: number;
  readonly windowMs?: number;
}

export function createSharedBatchStarter(client: Client, log: Log, options: SharedBatchOptions): CardStarter {
  const windowMs = options.windowMs ?? SHARED_BATCH_WINDOW_MS;
  let waiting: Waiting[] = [];
  let cardsWaiting = 0;
  let timer: NodeJS.Timeout | undefined;

  const flush = (): void => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    const taken = waiting;
    waiting = [];
    cardsWaiting = 0;
    if (taken.length === 0) return;
    const failures = new Map<Waiting, ClaimedCard[]>(taken.map((w) => [w, []]));
    const batches = [...cutLane(taken, true, options.batchSize), ...cutLane(taken, false, options.batchSize)];
    void Promise.all(
      batches.map(async (slices) => {
        if (!(await startShared(client, log, slices))) for (const slice of slices) failures.get(slice.waiting)?.push(...slice.cards);
      }),
    ).then(() => {
      for (const [w, failed] of failures) w.settle(failed);
    });
  };

  return {
    start(request) {
      if (request.cards.length === 0) return Promise.resolve([]);
      return new Promise<ClaimedCard[]>((settle) => {
        waiting.push({ request, settle });
        cardsWaiting += request.cards.length;
        if (cardsWaiting >= options.batchSize || request.cards.some((card) => card.fromPriority)) flush();
        else timer ??= setTimeout(flush, windowMs);
      });
    },
  };
}

/** The waiting requests' cards of one lane cut into batches of at most `size`, each a list of per-request slices, in arrival order. */
function cutLane(taken: readonly Waiting[], fromPriority: boolean, size: number): Slice[][] {
  const batches: Slice[][] = [];
  let current: Slice[] = [];
  let room = size;
  for (const w of taken) {
    let cards = w.request.cards.filter((card) => card.fromPriority === fromPriority);
    while (cards.length > 0) {
      const slice = cards.slice(0, room);
      current.push({ waiting: w, cards: slice });
      cards = cards.slice(slice.length);
      room -= slice.length;
      if (room === 0) {
        batches.push(current);
        current = [];
        room = size;
      }
    }
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

/** Starts one shared batch; false when it could not start (every card's claim is then given back by its round). */
async function startShared(client: Client, log: Log, slices: readonly Slice[]): Promise<boolean> {
  const first = slices[0];
  if (first === undefined) return true;
  const { request } = first.waiting;
  const parts: CardBatchPart[] = slices.map(({ waiting: { request: r }, cards }) => ({
    carrierId: r.carrierId,
    cards,
    ...(r.roundAt === undefined ? {} : { claimedAt: r.roundAt }),
    ...(r.dueHorizonMs ? { dueHorizonMs: r.dueHorizonMs } : {}),
  }));
  const cards = slices.flatMap((slice) => slice.cards);
  const fromPriority = cards[0]?.fromPriority ?? false;
  const oneRound = slices.every((slice) => slice.waiting === first.waiting);
  const args: CardBatchArgs = { carrierId: request.carrierId, cards: [], parts, fromPriority, taskQueues: request.placement.taskQueues };
  const attributes: SearchAttributePair[] = [cardIdsSearchAttribute(cards)];
  if (oneRound) attributes.push({ key: CARRIER_ID_ATTRIBUTE, value: request.carrierId }, { key: CLAIMED_BY_ATTRIBUTE, value: request.placement.claimedBy });
  const workflowId = cardBatchWorkflowId(oneRound ? request.carrierId : 'shared', randomUUID(), 0, request.placement.workflowIdPrefix);
  try {
    await client.workflow.start('cardBatch', {
      workflowId,
      ...cardRunPlacement(request.placement.taskQueues, fromPriority),
      args: [args],
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      typedSearchAttributes: attributes,
    });
    return true;
  } catch (error) {
    log('shared cardBatch could not start; releasing its claims', { workflowId, cards: cards.map((card) => card.cardId), error: String(error) });
    return false;
  }
}
