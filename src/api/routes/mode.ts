/** Polling mode (DESIGN §8): read from system_config, switched through pollingControl's setMode update. */
import type { FastifyInstance } from 'fastify';
import { getPollingMode } from '../../db/systemConfig.js';
import type { PollingMode } from '../../common/orchestration.js';
import { pollingControlWorkflowId } from '../../common/orchestration.js';
import { setMode } from '../../polling/temporalControl.js';
import type { ApiContext } from '../context.js';
import { requireRunning } from '../orchestration.js';
import { modeSchema } from '../schemas.js';

export function registerModeRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get('/v1/mode', { schema: { tags: ['mode'], summary: 'Current polling mode' } }, async () => {
    const setting = await getPollingMode(ctx.deps.pool);
    return { mode: setting.mode, updatedAt: setting.updatedAt, updatedBy: setting.updatedBy };
  });

  app.put('/v1/mode', { schema: { tags: ['mode'], summary: 'Switch polling mode (carrier rebuilds Redis first; legacy drains)', body: modeSchema } }, async (request) => {
    const { mode } = request.body as { mode: PollingMode };
    const workflowId = pollingControlWorkflowId(ctx.orchestration.workflowIdPrefix);
    const result = await requireRunning('pollingControl', () => setMode(ctx.orchestration, mode));
    request.log.info({ workflowId, mode: result.mode, changed: result.changed }, 'mode switched');
    return result;
  });
}
