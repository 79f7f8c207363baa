/** Polling mode (`carrier` or `legacy`): read from system_config, switched through pollingControl's setMode update. */
import { getPollingMode } from '../../db/systemConfig.js';
import { pollingControlWorkflowId } from '../../workflow-safe/workflowIds.js';
import { setMode } from '../../app/temporalControl.js';
import type { ApiApp } from '../app.js';
import type { ApiContext } from '../context.js';
import { requireRunning } from '../workflowCalls.js';
import { errorResponses, modeSchema, modeSettingSchema, modeSwitchSchema } from '../schemas.js';
import { registerIngestModeRoutes } from './ingestMode.js';

export function registerModeRoutes(app: ApiApp, ctx: ApiContext): void {
  registerIngestModeRoutes(app, ctx);
  app.get('/v1/mode', { schema: { tags: ['mode'], summary: 'Current polling mode', response: { 200: modeSettingSchema, ...errorResponses } } }, async () => {
    const setting = await getPollingMode(ctx.deps.pool);
    return { mode: setting.mode, updatedAt: setting.updatedAt, updatedBy: setting.updatedBy };
  });

  app.put(
    '/v1/mode',
    {
      schema: {
        tags: ['mode'],
        summary: 'Switch polling mode (carrier rebuilds Redis first; legacy drains)',
        body: modeSchema,
        response: { 200: modeSwitchSchema, ...errorResponses },
      },
    },
    async (request) => {
      const { mode } = request.body;
      const workflowId = pollingControlWorkflowId(ctx.orchestration.workflowIdPrefix);
      const result = await requireRunning('pollingControl', () => setMode(ctx.orchestration, mode));
      request.log.info({ workflowId, mode: result.mode, changed: result.changed }, 'mode switched');
      return result;
    },
  );
}
