/**
 * The child-start options of the card runs a carrierScheduler round starts: where each run goes,
 * under which id, with which input and search attributes. Pure (no command is emitted here), so
 * the placement rules are unit-tested; the workflow passes these to `startChild`.
 */
import { ParentClosePolicy, WorkflowIdReusePolicy, type ChildWorkflowOptions } from '@temporalio/workflow';
import type { WithWorkflowArgs, Workflow } from '@temporalio/common';
import { CARD_ID_ATTRIBUTE, CARRIER_ID_ATTRIBUTE, CLAIMED_BY_ATTRIBUTE, cardIdsSearchAttribute } from '../../workflow-safe/searchAttributes.js';
import { cardRunPlacement } from '../../workflow-safe/taskQueues.js';
import { cardWorkflowId } from '../../workflow-safe/workflowIds.js';
import { cardBatchWorkflowId } from '../../workflow-safe/workflowIds.js';
import type { cardCheck } from '../cardCheck.js';
import type { cardBatch } from '../cardBatch.js';
import type { Launch } from './schedulerState.js';
import type { CarrierSchedulerArgs } from './schedulerSettings.js';

/** startChild's options for a workflow function (its type is the function's: no typeInfo of its own). */
type ChildStart<W extends Workflow> = WithWorkflowArgs<W, Omit<ChildWorkflowOptions, 'typeInfo'>>;
type CardLaunch = Extract<Launch, { kind: 'card' }>;
type BatchLaunch = Extract<Launch, { kind: 'batch' }>;

/** The claim's due horizon travels only when there is one (an absent field is 0 to the run). */
const dueHorizon = (run: Launch): { dueHorizonMs?: number } => (run.dueHorizonMs > 0 ? { dueHorizonMs: run.dueHorizonMs } : {});

/** One card's `cardCheck` run: id `card-<cardId>`, on the priority queue when claimed from the priority lane. */
export function cardCheckStart(args: CarrierSchedulerArgs, run: CardLaunch, claimedBy: string): ChildStart<typeof cardCheck> {
  const { card } = run;
  return {
    workflowId: cardWorkflowId(card.cardId, args.workflowIdPrefix),
    ...cardRunPlacement(args.taskQueues, card.fromPriority),
    args: [
      {
        carrierId: args.carrierId,
        cardId: card.cardId,
        token: card.token,
        fromPriority: card.fromPriority,
        claimedAt: run.claimedAt,
        taskQueues: args.taskQueues,
        ...dueHorizon(run),
      },
    ],
    parentClosePolicy: ParentClosePolicy.ABANDON,
    // A new run under the same id for every execution; Temporal rejects one while another runs.
    // No run timeout: every phase of the run bounds itself (step and total timeouts), except the
    // records, which wait for PostgreSQL as long as it takes after the claim is finished.
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
    typedSearchAttributes: [
      { key: CARD_ID_ATTRIBUTE, value: card.cardId },
      { key: CARRIER_ID_ATTRIBUTE, value: args.carrierId },
      { key: CLAIMED_BY_ATTRIBUTE, value: claimedBy },
    ],
  };
}

/**
 * CARD_RUN_SHAPE=batch: one `cardBatch` run per batch of the round (priority batches first, on the
 * priority queue); its id names the round, so ids never repeat and no two batches share one.
 */
export function cardBatchStart(args: CarrierSchedulerArgs, run: BatchLaunch, claimedBy: string): ChildStart<typeof cardBatch> {
  const { batch } = run;
  return {
    workflowId: cardBatchWorkflowId(args.carrierId, run.tokenPrefix, batch.index, args.workflowIdPrefix),
    ...cardRunPlacement(args.taskQueues, batch.fromPriority),
    args: [
      {
        carrierId: args.carrierId,
        cards: batch.cards,
        fromPriority: batch.fromPriority,
        claimedAt: run.claimedAt,
        taskQueues: args.taskQueues,
        ...dueHorizon(run),
      },
    ],
    parentClosePolicy: ParentClosePolicy.ABANDON,
    typedSearchAttributes: [
      cardIdsSearchAttribute(batch.cards),
      { key: CARRIER_ID_ATTRIBUTE, value: args.carrierId },
      { key: CLAIMED_BY_ATTRIBUTE, value: claimedBy },
    ],
  };
}
