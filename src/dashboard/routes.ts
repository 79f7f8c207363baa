/**
 * The dashboard served by the API: the page and its modules (public), and two token-protected
 * JSON routes the page needs beside the /v1 API — the last 15 minutes of account status and the
 * card search by ICCID or id. Everything else the page shows comes from the /v1 routes themselves.
 */
import type { ApiApp } from '../api/app.js';
import type { ApiContext } from '../api/context.js';
import { errorResponses } from '../api/schemas.js';
import { DomainError } from '../domain/errors.js';
import { loadAssets } from './assets.js';
import { lookupCard } from './cardLookup.js';
import { StatusSampler } from './sampler.js';
import { apiStatusSource } from './statusSource.js';

export interface DashboardOptions {
  /** How often each account's status is sampled for the charts. */
  readonly sampleEveryMs?: number;
}

/** What the charts span. */
export const HISTORY_WINDOW_MS = 15 * 60_000;
const DEFAULT_SAMPLE_EVERY_MS = 5000;

/**
 * Only HTML, scripts and styles of this origin; the page talks to this API only. The token lives
 * in the page's storage, so no foreign script may run beside it.
 */
const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

const historyQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { since: { type: 'integer', minimum: 0, description: 'only samples taken after this epoch millisecond' } },
} as const;

const groupSample = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'used', 'effective', 'configured'],
  properties: { name: { type: 'string' }, used: { type: 'number' }, effective: { type: 'number' }, configured: { type: 'number' } },
} as const;

const statusSample = {
  type: 'object',
  additionalProperties: false,
  required: ['t', 'callsPerSec', 'groups', 'latenessP50', 'latenessP99', 'inflight', 'priority', 'normal', 'dueNow', 'stretchFactor'],
  properties: {
    t: { type: 'integer' },
    callsPerSec: { type: 'number' },
    groups: { type: 'array', items: groupSample },
    latenessP50: { type: 'number' },
    latenessP99: { type: 'number' },
    inflight: { type: 'integer' },
    priority: { type: 'integer' },
    normal: { type: 'integer' },
    dueNow: { type: 'integer' },
    stretchFactor: { type: 'number' },
  },
} as const;

const historyResponse = {
  type: 'object',
  additionalProperties: false,
  required: ['sampleEveryMs', 'windowMs', 'carriers'],
  properties: {
    sampleEveryMs: { type: 'integer' },
    windowMs: { type: 'integer' },
    carriers: { type: 'object', additionalProperties: { type: 'array', items: statusSample }, description: 'carrier id → samples, oldest first' },
  },
} as const;

const lookupQuery = {
  type: 'object',
  required: ['q'],
  additionalProperties: false,
  properties: { q: { type: 'string', minLength: 1, maxLength: 40, description: 'ICCID or card id' } },
} as const;

const lookupResponse = {
  type: 'object',
  additionalProperties: false,
  required: ['cardId', 'iccid', 'carrierId', 'workflowId', 'workflowsUrl', 'workflowsQuery', 'runUrlPrefix'],
  properties: {
    cardId: { type: 'string' },
    iccid: { type: 'string' },
    carrierId: { type: 'string' },
    workflowId: { type: 'string' },
    workflowsUrl: { type: 'string' },
    workflowsQuery: { type: 'string', description: 'the Web UI query behind workflowsUrl: WorkflowId="card-<id>", or CardIds="<id>" in the batch shape' },
    runUrlPrefix: { type: 'string' },
  },
} as const;

export async function registerDashboard(app: ApiApp, ctx: ApiContext, options: DashboardOptions = {}): Promise<void> {
  const assets = await loadAssets();
  const sampler = new StatusSampler(apiStatusSource(ctx), {
    everyMs: options.sampleEveryMs ?? DEFAULT_SAMPLE_EVERY_MS,
    windowMs: HISTORY_WINDOW_MS,
    idleAfterMs: HISTORY_WINDOW_MS,
    onError: (error, carrierId) => app.log.debug({ err: error, carrierId }, 'dashboard status sample failed'),
  });
  app.addHook('onClose', async () => sampler.stop());

  // The page and its files hold no data and need no token (a browser cannot send one when it
  // navigates); every data call the page makes carries the token.
  app.get('/', { schema: { hide: true }, config: { public: true } }, async (_request, reply) => reply.redirect('/dashboard'));
  for (const asset of assets) {
    app.get(asset.path, { schema: { hide: true }, config: { public: true } }, async (_request, reply) =>
      reply
        .header('content-type', asset.contentType)
        .header('cache-control', 'no-cache')
        .header('content-security-policy', CONTENT_SECURITY_POLICY)
        .header('x-content-type-options', 'nosniff')
        .send(asset.body),
    );
  }

  app.get(
    '/dashboard/api/history',
    {
      schema: {
        tags: ['dashboard'],
        summary: 'Status samples of every account over the last 15 minutes',
        querystring: historyQuery,
        response: { 200: historyResponse, ...errorResponses },
      },
    },
    async (request) => {
      sampler.want();
      return sampler.history(request.query.since);
    },
  );

  app.get(
    '/dashboard/api/cards/lookup',
    {
      schema: {
        tags: ['dashboard'],
        summary: 'Find a card by ICCID or id; its Temporal Web UI addresses',
        querystring: lookupQuery,
        response: { 200: lookupResponse, ...errorResponses },
      },
    },
    async (request) => {
      const { q } = request.query;
      const settings = {
        temporalUiUrl: ctx.config.TEMPORAL_UI_URL,
        namespace: ctx.config.TEMPORAL_NAMESPACE,
        workflowIdPrefix: ctx.orchestration.workflowIdPrefix,
        runShape: ctx.config.CARD_RUN_SHAPE,
      };
      const found = await lookupCard(ctx.deps.pool, settings, q);
      if (found === null) throw DomainError.notFound('q', `no card with ICCID or id ${q.trim()}`);
      return found;
    },
  );
}
