/**
 * The HTTP API server: Fastify with pino JSON logs, bearer auth, JSON-schema
 * validation and typed handlers, one error shape, request metrics, and the OpenAPI document
 * generated from the route schemas (page at /docs, JSON at /docs/json). Built without listening
 * so tests drive it with `inject`.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { ApiTypeProvider } from './app.js';
import type { ApiContext } from './context.js';
import { registerAuth } from './auth.js';
import { errorBody, handleError } from './errors.js';
import { registerHttpMetrics } from './httpMetrics.js';
import { waitForHandlersOnClose } from './inflightHandlers.js';
import { registerOpenApi } from './openapi.js';
import { registerAlertRoutes } from './routes/alerts.js';
import { registerCardImportRoutes } from './routes/cardImport.js';
import { registerCardRoutes } from './routes/cards.js';
import { registerCarrierRoutes } from './routes/carriers.js';
import { registerCarrierStatusRoutes } from './routes/carrierStatus.js';
import { registerHealthRoutes } from './routes/health.js';
import { registerModeRoutes } from './routes/mode.js';
import { registerPollingConfigRoutes } from './routes/pollingConfigs.js';
import { registerRequestCheckRoutes } from './routes/requestCheck.js';
import { registerEventRoutes } from './routes/events.js';
import { registerDashboard } from '../dashboard/routes.js';

export interface ApiServerOptions {
  /** Overrides config.LOG_LEVEL (tests pass 'silent'). */
  readonly logLevel?: string;
}

/** Default body limit; only the import route allows more. */
const BODY_LIMIT = 1024 * 1024;

export async function buildApiServer(ctx: ApiContext, options: ApiServerOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: { level: options.logLevel ?? ctx.config.LOG_LEVEL, base: { service: 'card-poller-api' } },
    bodyLimit: BODY_LIMIT,
    ajv: {
      customOptions: {
        // Unknown fields are an error (a typo must not be silently ignored), not stripped.
        removeAdditional: false,
        allErrors: false,
      },
    },
  }).withTypeProvider<ApiTypeProvider>();
  // First: only routes registered after it are tracked.
  waitForHandlersOnClose(app);
  app.setErrorHandler(handleError);
  app.setNotFoundHandler((request, reply) =>
    reply.status(404).send(errorBody('not_found', `no route ${request.method} ${request.url.split('?', 1)[0] ?? ''}`)),
  );
  registerAuth(app, ctx.config.API_TOKEN);
  registerHttpMetrics(app, ctx.deps.registry);
  await registerOpenApi(app);

  registerHealthRoutes(app, ctx);
  registerCarrierRoutes(app, ctx);
  registerCarrierStatusRoutes(app, ctx);
  registerPollingConfigRoutes(app, ctx);
  registerCardRoutes(app, ctx);
  registerCardImportRoutes(app, ctx);
  registerRequestCheckRoutes(app, ctx);
  registerModeRoutes(app, ctx);
  registerAlertRoutes(app, ctx);
  registerEventRoutes(app, ctx);
  await registerDashboard(app, ctx);

  await app.ready();
  return app;
}
