/**
 * Request-check of one card (a durable priority item, then the Redis request): validated here with the same rules as the workflow
 * update validator, then sent through the account scheduler's `requestCheck` update — never
 * around the orchestration.
 */
import { getCard } from '../../db/cards.js';
import type { RequestCheckInput } from '../../workflow-safe/requestCheck.js';
import { validateRequestCheck } from '../../workflow-safe/requestCheckValidation.js';
import { schedulerWorkflowId } from '../../workflow-safe/workflowIds.js';
import { requestCheck } from '../../app/temporalControl.js';
import type { ApiApp } from '../app.js';
import type { ApiContext } from '../context.js';
import { requireRunning } from '../workflowCalls.js';
import { errorResponses, idParams, requestCheckAnswerSchema, requestCheckSchema } from '../schemas.js';

export function registerRequestCheckRoutes(app: ApiApp, ctx: ApiContext): void {
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
      const result = await requireRunning(`the scheduler of carrier account ${card.carrierId}`, () => requestCheck(ctx.orchestration, card.carrierId, input));
      request.log.info({ cardId: id, carrierId: card.carrierId, workflowId, types: body.types, lane: body.lane ?? 'priority', result }, 'request-check');
      return result;
    },
  );
}
