/**
 * Starts the API on config.API_HOST:API_PORT with connections the caller already has (used by
 * `src/api/main.ts`, and meant for `npm start`'s demo/start.ts to delegate to).
 */
import type { Config } from '../config/index.js';
import type { PollingServices } from '../app/pollingServices.js';
import type { OrchestrationRef } from '../app/temporalControl.js';
import type { RuntimeDeps } from '../runtime/deps.js';
import { assertSafeApiBinding } from './bindCheck.js';
import { buildApiServer } from './server.js';

export interface RunningApi {
  readonly url: string;
  close(): Promise<void>;
}

export async function startApiServer(config: Config, deps: RuntimeDeps, services: PollingServices, orchestration: OrchestrationRef): Promise<RunningApi> {
  assertSafeApiBinding(config);
  const app = await buildApiServer({ config, deps, services, orchestration });
  const address = await app.listen({ host: config.API_HOST, port: config.API_PORT });
  return { url: address, close: () => app.close() };
}
