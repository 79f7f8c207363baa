/**
 * Ingest mode (`polling.ingest.mode`: `sync` or `async`), read and switched in system_config without a
 * restart, with the ingest's state: backlog, oldest pending age, write rate, backpressure.
 */
import { getIngestMode } from '../../db/systemConfig.js';
import { switchIngestMode } from '../../ingest/mode.js';
import { ingestSettings } from '../../ingest/service.js';
import { ingestStatus } from '../../ingest/status.js';
import type { ApiApp } from '../app.js';
import type { ApiContext } from '../context.js';
import { errorResponses } from '../schemas.js';

const ingestMode = { type: 'string', enum: ['sync', 'async'] } as const;

const ingestModeBody = { type: 'object', required: ['mode'], additionalProperties: false, properties: { mode: ingestMode } } as const;

const count = { type: 'integer', minimum: 0 } as const;

const ingestModeSetting = {
  type: 'object',
  required: ['mode', 'updatedAt', 'updatedBy', 'backlog', 'writeRatePerSec', 'tightened', 'thresholds', 'deadLetters'],
  additionalProperties: false,
  properties: {
    mode: ingestMode,
    updatedAt: { type: 'string', format: 'date-time' },
    updatedBy: { type: 'string' },
    backlog: {
      type: 'object',
      description: 'records handed to the ingest and not yet committed, and the age of the oldest',
      required: ['records', 'oldestPendingAgeMs'],
      additionalProperties: false,
      properties: { records: count, oldestPendingAgeMs: count },
    },
    writeRatePerSec: { type: 'number', description: 'records committed per second over the last ten seconds' },
    tightened: { type: 'boolean', description: 'the backlog is over its thresholds: claiming is tightened for every account' },
    thresholds: { type: 'object', required: ['records', 'maxAgeMs'], additionalProperties: false, properties: { records: count, maxAgeMs: count } },
    deadLetters: { ...count, description: 'records that could never be written (table ingest_dead_letter)' },
  },
} as const;

const ingestModeSwitch = {
  type: 'object',
  required: ['mode', 'changed'],
  additionalProperties: false,
  properties: { mode: ingestMode, changed: { type: 'boolean' } },
} as const;

export function registerIngestModeRoutes(app: ApiApp, ctx: ApiContext): void {
  app.get(
    '/v1/mode/ingest',
    {
      schema: {
        tags: ['mode'],
        summary: 'Current ingest mode (sync: card workers write their records; async: batched by the ingest workers)',
        response: { 200: ingestModeSetting, ...errorResponses },
      },
    },
    async () => {
      const { config, pool, redis } = ctx.deps;
      const [setting, status] = await Promise.all([
        getIngestMode(pool),
        ingestStatus({ pool, redis, namespace: config.REDIS_KEY_PREFIX, thresholds: ingestSettings(config).thresholds }),
      ]);
      return { ...status, mode: setting.mode, updatedAt: setting.updatedAt, updatedBy: setting.updatedBy };
    },
  );

  app.put(
    '/v1/mode/ingest',
    {
      schema: {
        tags: ['mode'],
        summary: 'Switch the ingest mode at run time (no record in flight is lost)',
        body: ingestModeBody,
        response: { 200: ingestModeSwitch, ...errorResponses },
      },
    },
    async (request) => {
      const result = await switchIngestMode(ctx.deps.pool, request.body.mode, 'api');
      // This process' cached reads see the new mode at once; card workers within their cache time.
      ctx.deps.reference.invalidate();
      request.log.info({ mode: result.mode, changed: result.changed }, 'ingest mode switched');
      return result;
    },
  );
}
