/**
 * Stand-alone API process: connects to PostgreSQL, Redis and Temporal from the configuration and
 * listens on API_HOST:API_PORT. Workers need not run for the non-Temporal routes.
 */
import { Client, Connection } from '@temporalio/client';
import { loadConfigOrExit, taskQueues } from '../config/index.js';
import { createPollingServices } from '../app/pollingServices.js';
import { wakeSchedulers } from '../app/temporalControl.js';
import { createRuntimeDeps } from '../runtime/deps.js';
import { startApiServer } from './start.js';
import { assertSafeApiBinding, UnsafeApiBindingError } from './bindCheck.js';
import { createProcessLogger, lifecycleLogger } from '../runtime/logger.js';

const SERVICE = 'card-poller-api';
const config = loadConfigOrExit();
// Lines of the process itself; requests are logged by Fastify's logger, with the same service name.
const lifecycle = lifecycleLogger(createProcessLogger(config, SERVICE));
try {
  assertSafeApiBinding(config);
} catch (error) {
  if (!(error instanceof UnsafeApiBindingError)) throw error;
  lifecycle.fatal(error.message);
  process.exit(2);
}
const deps = await createRuntimeDeps(config, { name: SERVICE });
// Lazy: the API starts (and /readyz reports Temporal down) even when Temporal is unreachable.
const connection = Connection.lazy({ address: config.TEMPORAL_ADDRESS });
const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
const orchestration = { client, taskQueues: taskQueues(config), workflowIdPrefix: config.WORKFLOW_ID_PREFIX };
const services = createPollingServices({ deps, wakeSchedulers: (carrierIds) => wakeSchedulers(orchestration, carrierIds) });
const api = await startApiServer(config, deps, services, orchestration);
lifecycle.info({ url: api.url, docs: `${api.url}/docs` }, `card-poller API on ${api.url} (docs at ${api.url}/docs)`);

let stopping = false;
const stop = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  lifecycle.info('API stopping');
  await api.close();
  await connection.close();
  await deps.close();
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
