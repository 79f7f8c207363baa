/**
 * Carrier accounts: create, list, get, patch. Each answers once the row is written: a new, enabled
 * or disabled account reaches pollingControl through the table's change notification (migration
 * 000010, src/workers/reconcileOnAccountChange.ts), whose reconcile starts its scheduler within
 * moments. Waiting for that reconcile here would wait for whatever it runs first, which can be a
 * whole rebuild of Redis (docs/design.md, "Rebuild and the Redis-flush guard"); the account's status
 * shows such a rebuild's progress (`rebuild`).
 */
import { createCarrier, getCarrier, listCarriers, updateCarrier } from '../../db/carriers.js';
import { notifyConfigChanged } from '../../app/temporalControl.js';
import type { ApiApp } from '../app.js';
import type { ApiContext } from '../context.js';
import { notifyIfRunning } from '../workflowCalls.js';
import { decodeCursor, ID_CURSOR, pageOf, pageQuerySchema } from '../pagination.js';
import { carrierPatchSchema, carrierSchema, errorResponses, idParams, newCarrierSchema, pageOfSchema } from '../schemas.js';

export function registerCarrierRoutes(app: ApiApp, ctx: ApiContext): void {
  const { pool } = ctx.deps;

  app.post(
    '/v1/carriers',
    { schema: { tags: ['carriers'], summary: 'Create a carrier account', body: newCarrierSchema, response: { 201: carrierSchema, ...errorResponses } } },
    async (request, reply) => {
      const carrier = await createCarrier(pool, request.body);
      request.log.info({ carrierId: carrier.id }, 'carrier created');
      return reply.status(201).send(carrier);
    },
  );

  app.get(
    '/v1/carriers',
    {
      schema: {
        tags: ['carriers'],
        summary: 'List carrier accounts',
        querystring: { type: 'object', additionalProperties: false, properties: pageQuerySchema },
        response: { 200: pageOfSchema(carrierSchema), ...errorResponses },
      },
    },
    async (request) => {
      const { query } = request;
      const after = decodeCursor(query.cursor, ID_CURSOR) ?? '0';
      // Accounts number in the tens to hundreds: one read, paged in memory.
      const carriers = (await listCarriers(pool)).filter((carrier) => BigInt(carrier.id) > BigInt(after));
      return pageOf(carriers.slice(0, query.limit + 1), query.limit, (carrier) => carrier.id);
    },
  );

  app.get(
    '/v1/carriers/:id',
    { schema: { tags: ['carriers'], summary: 'One carrier account', params: idParams, response: { 200: carrierSchema, ...errorResponses } } },
    async (request) => {
      const { id } = request.params;
      return getCarrier(pool, id);
    },
  );

  app.patch(
    '/v1/carriers/:id',
    {
      schema: {
        tags: ['carriers'],
        summary: 'Change a carrier account (groups / typeGroups replace the whole set)',
        params: idParams,
        body: carrierPatchSchema,
        response: { 200: carrierSchema, ...errorResponses },
      },
    },
    async (request) => {
      const { id } = request.params;
      const carrier = await updateCarrier(pool, id, request.body);
      request.log.info({ carrierId: id }, 'carrier updated');
      // The running scheduler re-reads the account at its next round on configChanged; without it
      // (Temporal away) within the reference cache's 2 s anyway, so the answer does not wait for the
      // signal. A change of `enabled` reaches pollingControl through the change notification.
      void notifyIfRunning(() => notifyConfigChanged(ctx.orchestration, id)).catch((error: unknown) =>
        request.log.warn({ err: error, carrierId: id }, 'configChanged signal not sent; the scheduler re-reads the account within seconds'),
      );
      return carrier;
    },
  );
}
