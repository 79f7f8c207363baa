/**
 * Request-check of one card (a durable priority item, then the Redis request): validated with the
 * same rules as the scheduler's update validator, served here, then the account's scheduler is
 * woken to claim the card (src/app/requestCheckService.ts).
 */
import { getCard } from '../../db/cards.js';
import { describeFailure, sqlState } from '../../db/errors.js';
import { serveRequestCheck } from '../../app/requestCheckService.js';
import type { RequestCheckInput } from '../../workflow-safe/requestCheck.js';
import { validateRequestCheck } from '../../workflow-safe/requestCheckValidation.js';
import { schedulerWorkflowId } from '../../workflow-safe/workflowIds.js';
import type { ApiApp } from '../app.js';
import type { ApiContext } from '../context.js';
import { ApiError } from '../errors.js';
import { requireRunning } from '../workflowCalls.js';
import { bulkRequestCheckAnswerSchema, bulkRequestCheckSchema, errorResponses, idParams, requestCheckAnswerSchema, requestCheckSchema } from '../schemas.js';
import { bulkRequestCheck } from '../../app/bulkRequestCheck.js';

/** Data PostgreSQL refuses (class 22, e.g. a value beyond its column) is the caller's: 400. */
function callersData(error: unknown): unknown {
  return sqlState(error)?.startsWith('22') === true ? new ApiError(400, 'invalid', describeFailure(error)) : error;
}

export function registerRequestCheckRoutes(app: ApiApp, ctx: ApiContext): void {
  app.post(
    '/v1/request-checks',
    {
      schema: {
        tags: ['cards'],
        summary: 'Ask for an immediate check of many cards: cardIds, or a filter (an account’s polled cards, of a status); one result per card',
        body: bulkRequestCheckSchema,
        response: { 200: bulkRequestCheckAnswerSchema, ...errorResponses },
      },
    },
    async (request) => {
      const { cardIds, filter, ...fields } = request.body;
      if ((cardIds === undefined) === (filter === undefined))
        throw new ApiError(400, 'invalid', 'name the cards with exactly one of cardIds or filter', 'cardIds');
      const selection = cardIds === undefined ? { filter: filter! } : { cardIds };
      const answer = await bulkRequestCheck(
        { pool: ctx.deps.pool, ref: ctx.orchestration, requests: ctx.services.requests, wake: ctx.config.SCHEDULER_LOOP === 'workflow' },
        selection,
        { ...fields, actor: 'api', source: 'api-bulk' },
      ).catch((error: unknown) => {
        throw callersData(error);
      });
      request.log.info({ cards: answer.cards, counts: answer.counts, types: fields.types, lane: fields.lane ?? 'priority' }, 'bulk request-check');
      return answer;
    },
  );

  app.post(
    '/v1/cards/:id/request-check',
    {
      schema: {
        tags: ['cards'],
        summary: 'Ask for an immediate check of some types',
        params: idParams,
        body: requestCheckSchema,
        response: { 200: requestCheckAnswerSchema, ...errorResponses },
      },
    },
    async (request) => {
      const { id } = request.params;
      const { body } = request;
      const input: RequestCheckInput = { ...body, cardId: id, actor: 'api', source: 'api' };
      validateRequestCheck(input);
      const card = await getCard(ctx.deps.pool, id);
      const workflowId = schedulerWorkflowId(card.carrierId, ctx.orchestration.workflowIdPrefix);
      const scheduler = `the scheduler of carrier account ${card.carrierId}`;
      const wake = ctx.config.SCHEDULER_LOOP === 'workflow';
      const result = await requireRunning(scheduler, () => serveRequestCheck(ctx.orchestration, ctx.services.requests, card.carrierId, input, { wake })).catch(
        (error: unknown) => {
          throw callersData(error);
        },
      );
      request.log.info({ cardId: id, carrierId: card.carrierId, workflowId, types: body.types, lane: body.lane ?? 'priority', result }, 'request-check');
      return result;
    },
  );
}
