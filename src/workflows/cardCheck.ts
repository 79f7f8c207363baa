/**
 * cardCheck(cardId, token, fromPriority): one execution of one card (CARD_RUN_SHAPE=card).
 *
 * Workflow id `card-<cardId>`, so the Web UI lists every execution of a card under one id and
 * Temporal refuses a second concurrent run. The execution itself is `executeCard`, shared with
 * `cardBatch`; this run's own part is its executor id (the run id) and the `CheckTypes`/`Outcome`
 * search attributes that make it findable.
 */
import { upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { CHECK_TYPES_ATTRIBUTE, OUTCOME_ATTRIBUTE } from '../workflow-safe/searchAttributes.js';
import type { ExecutionOutcome } from '../workflow-safe/cardRun.js';
import { executeCard, type CardExecutionInput } from './cardExecution.js';

export type CardCheckArgs = CardExecutionInput;

export async function cardCheck(args: CardCheckArgs): Promise<{ outcome: ExecutionOutcome }> {
  const { outcome, types } = await executeCard(args, { executorId: workflowInfo().runId });
  // One event for both attributes: the types run (when it got as far as running any) and how it ended.
  upsertSearchAttributes(
    types === undefined
      ? [{ key: OUTCOME_ATTRIBUTE, value: outcome }]
      : [
          { key: CHECK_TYPES_ATTRIBUTE, value: [...types] },
          { key: OUTCOME_ATTRIBUTE, value: outcome },
        ],
  );
  return { outcome };
}
