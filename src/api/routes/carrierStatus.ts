/** GET /v1/carriers/:id/status: the account's status (see ../queries/carrierStatus.ts). */
import type { ApiApp } from '../app.js';
import type { ApiContext } from '../context.js';
import { carrierStatusSchema, errorResponses, idParams } from '../schemas.js';
import { carrierStatus } from '../queries/carrierStatus.js';

export function registerCarrierStatusRoutes(app: ApiApp, ctx: ApiContext): void {
  app.get(
    '/v1/carriers/:id/status',
    {
      schema: {
        tags: ['carriers'],
        summary: 'Lanes, in-flight, budget use, lateness, expired leases, capacity',
        params: idParams,
        response: { 200: carrierStatusSchema, ...errorResponses },
      },
    },
    async (request) => {
      const { id } = request.params;
      return carrierStatus(ctx, id);
    },
  );
}
