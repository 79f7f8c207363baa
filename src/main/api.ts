/** Starts the HTTP API inside `npm start` (see src/api). */
import type { Config } from '../config/index.js';
import type { RuntimeDeps } from '../runtime/deps.js';
import type { PollingServices } from '../polling/services.js';
import type { OrchestrationRef } from '../polling/temporalControl.js';

export interface RunningApi {
  readonly url: string;
  close(): Promise<void>;
}

export async function startApi(_config: Config, _deps: RuntimeDeps, _services: PollingServices, _ref: OrchestrationRef): Promise<RunningApi | undefined> {
  return undefined;
}
