/** POST /v1/cards/import: JSON array or NDJSON, up to 50 000 cards, chunked (see services/cardImport.ts). */
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from '../context.js';
import { IMPORT_MAX_ROWS, importCards, parseNdjson } from '../services/cardImport.js';

export const NDJSON = 'application/x-ndjson';
/** 50 000 cards of a few hundred bytes each, with room for pretty-printed JSON. */
export const IMPORT_BODY_LIMIT = 64 * 1024 * 1024;

export function registerCardImportRoutes(app: FastifyInstance, ctx: ApiContext): void {
  // Parsed into the same array shape as a JSON body so one schema and one handler serve both.
  app.addContentTypeParser(NDJSON, { parseAs: 'string', bodyLimit: IMPORT_BODY_LIMIT }, (_request, body, done) => {
    done(null, parseNdjson(typeof body === 'string' ? body : body.toString('utf8')));
  });

  app.post(
    '/v1/cards/import',
    {
      bodyLimit: IMPORT_BODY_LIMIT,
      schema: {
        tags: ['cards'],
        summary: `Import up to ${IMPORT_MAX_ROWS} cards (JSON array or ${NDJSON}); answers { accepted, rejected: [{ row, field, reason }] }`,
        body: { type: 'array', maxItems: IMPORT_MAX_ROWS, items: {} },
      },
    },
    async (request) => {
      const rows = request.body as unknown[];
      const started = Date.now();
      const result = await importCards({ pool: ctx.deps.pool, lifecycle: ctx.services.lifecycle }, rows);
      request.log.info({ rows: rows.length, accepted: result.accepted, rejected: result.rejected.length, ms: Date.now() - started }, 'cards imported');
      return result;
    },
  );
}
