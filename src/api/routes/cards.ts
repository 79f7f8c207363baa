/** Cards: create one, list with filters, detail, patch (through the lifecycle), delete. */
import { getCard, listCards } from '../../db/cards.js';
import { DomainError } from '../../domain/errors.js';
import type { ApiApp } from '../app.js';
import type { ApiContext } from '../context.js';
import { decodeCursor, ID_CURSOR, pageOf, pageQuerySchema } from '../pagination.js';
import { cardDetailSchema, cardPatchSchema, cardSchema, errorResponses, idParams, idString, newCardSchema, noContent, pageOfSchema } from '../schemas.js';
import { CARD_STATUSES } from '../../domain/card.js';
import { cardDetail } from '../queries/cardDetail.js';

const listQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    ...pageQuerySchema,
    carrierId: idString,
    status: { type: 'string', enum: [...CARD_STATUSES] },
    polled: { type: 'boolean' },
  },
} as const;

export function registerCardRoutes(app: ApiApp, ctx: ApiContext): void {
  const { pool } = ctx.deps;
  const { lifecycle } = ctx.services;

  app.post(
    '/v1/cards',
    { schema: { tags: ['cards'], summary: 'Create one card', body: newCardSchema, response: { 201: cardSchema, ...errorResponses } } },
    async (request, reply) => {
      const card = await lifecycle.createCard(request.body);
      request.log.info({ cardId: card.id, carrierId: card.carrierId }, 'card created');
      return reply.status(201).send(card);
    },
  );

  app.get(
    '/v1/cards',
    {
      schema: {
        tags: ['cards'],
        summary: 'List cards (filters carrierId, status, polled; id order)',
        querystring: listQuerySchema,
        response: { 200: pageOfSchema(cardSchema), ...errorResponses },
      },
    },
    async (request) => {
      const { query } = request;
      const after = decodeCursor(query.cursor, ID_CURSOR) ?? '0';
      const filter = {
        ...(query.carrierId === undefined ? {} : { carrierId: query.carrierId }),
        ...(query.status === undefined ? {} : { status: query.status }),
        ...(query.polled === undefined ? {} : { polled: query.polled }),
      };
      const rows = await listCards(pool, filter, after, query.limit + 1);
      return pageOf(rows, query.limit, (card) => card.id);
    },
  );

  app.get(
    '/v1/cards/:id',
    {
      schema: {
        tags: ['cards'],
        summary: 'Card detail: due times, failures, open alerts, executions, Web UI link',
        params: idParams,
        response: { 200: cardDetailSchema, ...errorResponses },
      },
    },
    async (request) => {
      const { id } = request.params;
      return cardDetail(ctx, id);
    },
  );

  app.patch(
    '/v1/cards/:id',
    {
      schema: {
        tags: ['cards'],
        summary: 'Change polling switch, status or carrier account',
        params: idParams,
        body: cardPatchSchema,
        response: { 200: cardSchema, ...errorResponses },
      },
    },
    async (request) => {
      const { id } = request.params;
      const patch = request.body;
      // 404 before any write: every step below is its own lifecycle event.
      const before = await getCard(pool, id);
      // Carrier first so the status and polling steps re-derive Redis under the final account.
      if (patch.carrierId !== undefined && patch.carrierId !== before.carrierId) await lifecycle.changeCarrier(id, patch.carrierId);
      if (patch.status !== undefined && patch.status !== before.status) await lifecycle.changeStatus(id, patch.status);
      if (patch.enablePolling === true) await lifecycle.enablePolling(id);
      if (patch.enablePolling === false) await lifecycle.disablePolling(id);
      request.log.info({ cardId: id, carrierId: patch.carrierId ?? before.carrierId, patch }, 'card patched');
      return getCard(pool, id);
    },
  );

  app.delete(
    '/v1/cards/:id',
    { schema: { tags: ['cards'], summary: 'Delete a card (leaves polling at once)', params: idParams, response: { 204: noContent, ...errorResponses } } },
    async (request, reply) => {
      const { id } = request.params;
      if (!(await lifecycle.deleteCard(id))) throw DomainError.notFound('id', `card ${id} does not exist`);
      request.log.info({ cardId: id }, 'card deleted');
      return reply.status(204).send(null);
    },
  );
}
