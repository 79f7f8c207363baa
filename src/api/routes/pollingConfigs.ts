/** Polling configs: match rules → interval per check type. */
import { listCarriers } from '../../db/carriers.js';
import { createPollingConfig, deletePollingConfig, getPollingConfig, listPollingConfigs, updatePollingConfig } from '../../db/pollingConfigs.js';
import type { Intervals } from '../../domain/pollingConfig.js';
import { validateMatch } from '../../domain/pollingConfigInput.js';
import { CHECK_TYPES, type CheckType } from '../../workflow-safe/checkTypes.js';
import { notifyConfigChanged } from '../../app/temporalControl.js';
import type { ApiApp } from '../app.js';
import type { ApiContext } from '../context.js';
import { notifyIfRunning } from '../workflowCalls.js';
import { requestRebuild } from '../../lifecycle/rebuild.js';
import { decodeCursor, ID_CURSOR, pageOf, pageQuerySchema } from '../pagination.js';
import { errorResponses, idParams, newPollingConfigSchema, noContent, pageOfSchema, pollingConfigPatchSchema, pollingConfigSchema } from '../schemas.js';

/** A type set to null has no interval, as one left out: the set is replaced whole. */
function intervalsOf(input: Partial<Record<CheckType, number | null>>): Intervals {
  const intervals: Intervals = {};
  for (const type of CHECK_TYPES) {
    const seconds = input[type];
    if (typeof seconds === 'number') intervals[type] = seconds;
  }
  return intervals;
}

export function registerPollingConfigRoutes(app: ApiApp, ctx: ApiContext): void {
  const { pool } = ctx.deps;

  /**
   * Intervals feed every account's plans: tell each running scheduler to re-read its configuration,
   * and re-place the cards in Redis (a type that gains an interval gets a jittered due, one that
   * loses it leaves polling). The rebuild keeps existing due times, runs under its lock and in the
   * background (millions of cards take a while). A change made while a rebuild runs (which may
   * have read the old configuration) gets one more pass after it; a failed one is logged and
   * stays requested for the next change or `npm start` — it is idempotent.
   *
   * The change is committed when this runs: the rebuild is requested first, and a scheduler that
   * cannot be told (Temporal away) is logged, not answered as a failure — it reads the account
   * again when its reference data expires. A 503 here once left a committed change with no
   * rebuild requested at all (issue 46).
   */
  const announce = async (): Promise<void> => {
    requestRebuild({ pool, redis: ctx.deps.redis, store: ctx.deps.store, namespace: ctx.config.REDIS_KEY_PREFIX })
      .then((passes) =>
        app.log.info(
          { rebuild: passes },
          passes.length > 0 ? 'cards re-placed after a polling config change' : 'cards re-placed after a polling config change by another process',
        ),
      )
      .catch((error: unknown) => app.log.error({ err: error }, 're-placing cards after a polling config change failed'));
    const carriers = await listCarriers(pool, { enabledOnly: true });
    const told = await Promise.allSettled(carriers.map((carrier) => notifyIfRunning(() => notifyConfigChanged(ctx.orchestration, carrier.id))));
    const untold = told.filter((result) => result.status === 'rejected');
    if (untold.length > 0)
      app.log.warn(
        { schedulers: untold.length, err: (untold[0] as PromiseRejectedResult).reason },
        'polling config changed; some schedulers could not be told (they re-read it when their cache expires)',
      );
  };

  app.post(
    '/v1/polling-configs',
    {
      schema: {
        tags: ['polling-configs'],
        summary: 'Create a polling config',
        body: newPollingConfigSchema,
        response: { 201: pollingConfigSchema, ...errorResponses },
      },
    },
    async (request, reply) => {
      const { match, intervalsSec, ...rest } = request.body;
      const config = await createPollingConfig(pool, {
        ...rest,
        ...(match === undefined ? {} : { match: validateMatch(match) }),
        intervalsSec: intervalsOf(intervalsSec),
      });
      await announce();
      return reply.status(201).send(config);
    },
  );

  app.get(
    '/v1/polling-configs',
    {
      schema: {
        tags: ['polling-configs'],
        summary: 'List polling configs (id order)',
        querystring: { type: 'object', additionalProperties: false, properties: pageQuerySchema },
        response: { 200: pageOfSchema(pollingConfigSchema), ...errorResponses },
      },
    },
    async (request) => {
      const { query } = request;
      const after = BigInt(decodeCursor(query.cursor, ID_CURSOR) ?? '0');
      // Rules are few; one read, paged in memory in id order so cursors stay stable.
      const configs = (await listPollingConfigs(pool)).filter((config) => BigInt(config.id) > after).sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
      return pageOf(configs.slice(0, query.limit + 1), query.limit, (config) => config.id);
    },
  );

  app.get(
    '/v1/polling-configs/:id',
    { schema: { tags: ['polling-configs'], summary: 'One polling config', params: idParams, response: { 200: pollingConfigSchema, ...errorResponses } } },
    async (request) => {
      const { id } = request.params;
      return getPollingConfig(pool, id);
    },
  );

  app.patch(
    '/v1/polling-configs/:id',
    {
      schema: {
        tags: ['polling-configs'],
        summary: 'Change a polling config (intervalsSec / match replace the whole set)',
        params: idParams,
        body: pollingConfigPatchSchema,
        response: { 200: pollingConfigSchema, ...errorResponses },
      },
    },
    async (request) => {
      const { id } = request.params;
      const { match, intervalsSec, ...rest } = request.body;
      const patch = {
        ...rest,
        ...(match === undefined ? {} : { match: validateMatch(match) }),
        ...(intervalsSec === undefined ? {} : { intervalsSec: intervalsOf(intervalsSec) }),
      };
      const config = await updatePollingConfig(pool, id, patch);
      await announce();
      return config;
    },
  );

  app.delete(
    '/v1/polling-configs/:id',
    { schema: { tags: ['polling-configs'], summary: 'Delete a polling config', params: idParams, response: { 204: noContent, ...errorResponses } } },
    async (request, reply) => {
      const { id } = request.params;
      await deletePollingConfig(pool, id);
      await announce();
      return reply.status(204).send(null);
    },
  );
}
