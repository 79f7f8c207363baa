/**
 * Request-check of one card (DESIGN §9, §10): validated here with the same rules as the workflow
 * update validator, then sent through the account scheduler's `requestCheck` update — never
 * around the orchestration.
 */
import type { FastifyInstance } from 'fastify';
import { getCard } from '../../db/cards.js';
import type { CheckType } from '../../common/checkTypes.js';
import type { RequestCheckInput } from '../../common/orchestration.js';
import { validateRequestCheck } from '../../common/requestCheckValidation.js';
import { schedulerWorkflowId } from '../../common/orchestration.js';
import { requestCheck } from '../../polling/temporalControl.js';
import type { ApiContext } from '../context.js';
import { requireRunning } from '../orchestration.js';
import { idParams, requestCheckSchema } from '../schemas.js';

interface RequestCheckBody {
  readonly types: CheckType[];
  readonly lane?: 'priority' | 'normal';
  readonly cooldownMs?: number;
  readonly confirmDelaysSec?: number[];
  readonly expected?: string;
}

export function registerRequestCheckRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.post('/v1/cards/:id/request-check', { schema: { tags: ['cards'], summary: 'Ask for an immediate check of some types', params: idParams, body: requestCheckSchema } }, async (request) => {
    const { id } = request.params as { id: string };
    const body = request.body as RequestCheckBody;
    const input: RequestCheckInput = { ...body, cardId: id, actor: 'api', source: 'api' };
    validateRequestCheck(input);
    const card = await getCard(ctx.deps.pool, id);
    const workflowId = schedulerWorkflowId(card.carrierId, ctx.orchestration.workflowIdPrefix);
    const result = await requireRunning(`the scheduler of carrier account ${card.carrierId}`, () => requestCheck(ctx.orchestration, card.carrierId, input));
    request.log.info({ cardId: id, carrierId: card.carrierId, workflowId, types: body.types, lane: body.lane ?? 'priority', result }, 'request-check');
    return result;
  });
}
