/**
 * POST /v1/cards/import: JSON array or NDJSON, up to 50 000 cards, each row with its own outcome
 * (see ../importCards.ts). `?onExisting=skip|update|reject` says what a row whose ICCID is
 * already a card does; `skip` or `update` make re-sending the same file harmless.
 */
import type { ApiApp } from '../app.js';
import type { ApiContext } from '../context.js';
import { errorResponses } from '../schemas.js';
import { IMPORT_MAX_ROWS, ON_EXISTING, importCards, parseNdjson } from '../importCards.js';

export const NDJSON = 'application/x-ndjson';
/** 50 000 cards of a few hundred bytes each, with room for pretty-printed JSON. */
export const IMPORT_BODY_LIMIT = 64 * 1024 * 1024;

const importQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    onExisting: {
      type: 'string',
      enum: [...ON_EXISTING],
      default: 'reject',
      description: 'a row whose ICCID is already a card: reject it (default), skip it (left as it is), or update the card with the fields the row gives',
    },
  },
} as const;

const rowOutcome = {
  type: 'object',
  required: ['row', 'field', 'reason'],
  additionalProperties: false,
  properties: {
    row: { type: 'integer', description: 'index of the row in the input, from 0' },
    field: { type: 'string', description: 'the field at fault, or "row" for the row as a whole' },
    value: { description: "the row's value of that field, when it has one" },
    reason: { type: 'string' },
  },
} as const;

const importAnswer = {
  type: 'object',
  required: ['accepted', 'rejected'],
  additionalProperties: false,
  description:
    'Every row sent is counted once: accepted + updated + skipped + rejected + notLanded. Every row not named in rejected, skipped or notLanded was committed, with what brings it into polling.',
  properties: {
    accepted: { type: 'integer', description: 'new cards created' },
    rejected: { type: 'array', items: rowOutcome, description: 'rows not imported because of their content (fix and resend them)' },
    updated: { type: 'integer', description: 'with onExisting=update: existing cards now holding the values of their row' },
    skipped: { type: 'array', items: rowOutcome, description: 'with onExisting=skip: rows whose card exists, left as it is' },
    notLanded: {
      type: 'array',
      description: 'present when the database failed: valid rows that were not written (resend them, with onExisting=skip to be safe)',
      items: { type: 'object', required: ['row', 'reason'], additionalProperties: false, properties: { row: { type: 'integer' }, reason: { type: 'string' } } },
    },
  },
} as const;

export function registerCardImportRoutes(app: ApiApp, ctx: ApiContext): void {
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
        summary: `Import up to ${IMPORT_MAX_ROWS} cards (JSON array or ${NDJSON}, one card object per line); each row gets its own outcome`,
        consumes: ['application/json', NDJSON],
        querystring: importQuery,
        // Any item: a row that is not a card object is rejected on its own, not the whole request.
        body: {
          type: 'array',
          maxItems: IMPORT_MAX_ROWS,
          items: { description: 'a card object: iccid, carrierId, msisdn?, status?, enablePolling?, deviceId?, standalone?' },
        },
        response: { 200: importAnswer, ...errorResponses },
      },
    },
    async (request) => {
      const rows = request.body;
      const { onExisting } = request.query;
      const started = Date.now();
      const result = await importCards({ lifecycle: ctx.services.lifecycle }, rows, { onExisting });
      request.log.info(
        {
          rows: rows.length,
          onExisting,
          accepted: result.accepted,
          updated: result.updated,
          skipped: result.skipped?.length,
          rejected: result.rejected.length,
          notLanded: result.notLanded?.length,
          ms: Date.now() - started,
        },
        'cards imported',
      );
      return result;
    },
  );
}
