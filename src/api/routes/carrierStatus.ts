/** GET /v1/carriers/:id/status (DESIGN §10). */
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from '../context.js';
import { idParams } from '../schemas.js';
import { carrierStatus } from '../services/carrierStatus.js';

export function registerCarrierStatusRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get('/v1/carriers/:id/status', { schema: { tags: ['carriers'], summary: 'Lanes, in-flight, budget use, lateness, expired leases, capacity', params: idParams } }, async (request) => {
    const { id } = request.params as { id: string };
    return carrierStatus(ctx, id);
  });
}
