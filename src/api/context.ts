/**
 * What every route needs: configuration, the process' connections, the polling services and the
 * handle on the running orchestration. Built once by the entry point (or a test) and passed in.
 */
import type { Config } from '../config/index.js';
import type { RuntimeDeps } from '../runtime/deps.js';
import type { PollingServices } from '../app/pollingServices.js';
import type { OrchestrationRef } from '../app/temporalControl.js';

export interface ApiContext {
  readonly config: Config;
  readonly deps: RuntimeDeps;
  readonly services: PollingServices;
  /** Mode switches go through the workflows' updates via this handle; request-checks wake the account's scheduler through it. */
  readonly orchestration: OrchestrationRef;
}
