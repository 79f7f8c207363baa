/** Starts the HTTP API inside `npm start` (see src/api), sharing the workers' connections. */
import type { Config } from '../config/index.js';
import type { RuntimeDeps } from '../runtime/deps.js';
import type { PollingServices } from '../polling/services.js';
import type { OrchestrationRef } from '../polling/temporalControl.js';
import { startApiServer, type RunningApi } from '../api/start.js';

export type { RunningApi };

export async function startApi(config: Config, deps: RuntimeDeps, services: PollingServices, ref: OrchestrationRef): Promise<RunningApi> {
  return startApiServer(config, deps, services, ref);
}
