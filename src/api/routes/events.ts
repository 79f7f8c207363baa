/**
 * POST /v1/events: carrier events pushed to the orchestrator (docs/gateway-contract.md, 'Pushed
 * events'; docs/design.md, 'Freshness'). Authenticated by the account's HMAC signature instead of
 * the API token (a carrier holds no token of ours); stored in PostgreSQL before the 202, so an
 * accepted event is never lost, and applied in the background by the ingest workers
 * (src/events/applier.ts). Over the backlog bound the request is refused whole with 429.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ApiApp } from '../app.js';
import type { ApiContext } from '../context.js';
import { errorBody } from '../errors.js';
import { errorSchema } from '../schemas.js';
import {
  ACCOUNT_HEADER,
  CLOUDEVENTS,
  CLOUDEVENTS_BATCH,
  EventInputError,
  type CarrierEvent,
  MAX_EVENTS_PER_REQUEST,
  SIGNATURE_HEADER,
  SIGNATURE_WINDOW_S,
  parseEvents,
  verifySignature,
} from '../../gateway/events.js';
import { eventAccount, pendingEventCount, storeEvents } from '../../events/store.js';
import { eventCounter } from '../../events/metrics.js';

/** 1 000 events of well under 1 KiB each. */
const EVENTS_BODY_LIMIT = 2 * 1024 * 1024;
/** How long a backlog count is reused: the bound is approximate by a second of arrivals. */
const BACKLOG_READ_EVERY_MS = 1000;
/** What a throttled sender is told to wait: about what the applier needs for a few full batches. */
const THROTTLED_RETRY_AFTER_SEC = 5;

const acceptedAnswer = {
  type: 'object',
  required: ['accepted', 'duplicates'],
  additionalProperties: false,
  properties: {
    accepted: { type: 'integer', description: 'events stored now (applied within moments)' },
    duplicates: { type: 'integer', description: 'events whose id the account had sent before: stored once, not applied again' },
  },
} as const;

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function registerEventRoutes(app: ApiApp, ctx: ApiContext): void {
  const { pool } = ctx.deps;
  const count = eventCounter(ctx.deps.registry);
  let backlog = { readAt: Number.NEGATIVE_INFINITY, events: 0 };
  const pending = async (): Promise<number> => {
    if (Date.now() - backlog.readAt >= BACKLOG_READ_EVERY_MS) backlog = { readAt: Date.now(), events: await pendingEventCount(pool) };
    return backlog.events;
  };
  const refuse = (reply: FastifyReply, status: number, body: ReturnType<typeof errorBody>): FastifyReply => reply.status(status).send(body);

  // A scope of its own: the signature covers the raw body, so these content types reach the handler unparsed.
  void app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser(
      ['application/json', CLOUDEVENTS, CLOUDEVENTS_BATCH],
      { parseAs: 'string', bodyLimit: EVENTS_BODY_LIMIT },
      (_request, body, done) => {
        done(null, body);
      },
    );
    scope.post(
      '/v1/events',
      {
        bodyLimit: EVENTS_BODY_LIMIT,
        config: { public: true },
        schema: {
          tags: ['events'],
          summary: `Carrier events pushed to the orchestrator (up to ${MAX_EVENTS_PER_REQUEST} per request), signed with the account's event secret`,
          description:
            `Headers ${ACCOUNT_HEADER} (the account's gatewayAccount) and ${SIGNATURE_HEADER} (t=<unix s>,v1=<hex HMAC-SHA256 of "<t>.<body>">). ` +
            'Body: { events: [...] } or one event (application/json), or CloudEvents 1.0 (application/cloudevents+json, application/cloudevents-batch+json). See docs/gateway-contract.md.',
          consumes: ['application/json', CLOUDEVENTS, CLOUDEVENTS_BATCH],
          // Described, not validated here: the handler reads the raw body (the signature covers it) and names a bad field itself.
          body: {
            description: '{ events: [event, …] } | event | CloudEvent | [CloudEvent, …]; an event: { id, type, iccid, observedAt, changedAt?, observation }',
          },
          response: {
            202: acceptedAnswer,
            '4xx': {
              description: '400 invalid (field named), 401 signature, 404 unknown account, 409 no event secret, 429 backlog full (Retry-After)',
              ...errorSchema,
            },
          },
        },
      },
      async (request, reply) => {
        const raw = typeof request.body === 'string' ? request.body : '';
        const accountName = header(request, ACCOUNT_HEADER);
        if (accountName === undefined || accountName === '') {
          count('invalid');
          return refuse(reply, 400, errorBody('invalid', `the ${ACCOUNT_HEADER} header names the account (its gatewayAccount)`, ACCOUNT_HEADER));
        }
        const account = await eventAccount(pool, accountName);
        if (!account) {
          count('unauthorized');
          return refuse(reply, 404, errorBody('not_found', `no carrier account has gatewayAccount ${JSON.stringify(accountName)}`, ACCOUNT_HEADER));
        }
        if (account.secret === null) {
          count('unauthorized');
          return refuse(
            reply,
            409,
            errorBody(
              'conflict',
              `carrier account ${account.carrierId} has no event secret: set eventSecret (PATCH /v1/carriers/${account.carrierId}) to accept its events`,
            ),
          );
        }
        const signature = verifySignature(header(request, SIGNATURE_HEADER), account.secret, raw, Date.now());
        if (signature !== 'ok') {
          count('unauthorized');
          const why =
            signature === 'outside_window'
              ? `its time t is more than ${SIGNATURE_WINDOW_S} s from ours (a replayed request, or a clock off)`
              : `it is ${signature}`;
          return refuse(
            reply.header('www-authenticate', 'HMAC-SHA256'),
            401,
            errorBody('unauthorized', `${SIGNATURE_HEADER} refused: ${why}`, SIGNATURE_HEADER),
          );
        }
        let events: CarrierEvent[];
        try {
          events = parseEvents(header(request, 'content-type') ?? '', raw);
        } catch (error) {
          if (!(error instanceof EventInputError)) throw error;
          count('invalid');
          return refuse(reply, 400, errorBody('invalid', error.message, error.field));
        }
        if ((await pending()) + events.length > ctx.config.EVENTS_MAX_BACKLOG) {
          count('throttled', events.length);
          return refuse(
            reply.header('retry-after', String(THROTTLED_RETRY_AFTER_SEC)),
            429,
            errorBody(
              'unavailable',
              `events not yet applied are at their bound (EVENTS_MAX_BACKLOG ${ctx.config.EVENTS_MAX_BACKLOG}): nothing stored, send again later`,
            ),
          );
        }
        const stored = await storeEvents(pool, account.carrierId, events);
        backlog = { ...backlog, events: backlog.events + stored.accepted };
        count('accepted', stored.accepted);
        count('duplicate', stored.duplicates);
        return reply.status(202).send(stored);
      },
    );
  });
}
