/**
 * Stand-alone API process: connects to PostgreSQL, Redis and Temporal from the configuration and
 * listens on API_HOST:API_PORT. Workers need not run for the non-Temporal routes.
 */
import { Client, Connection } from '@temporalio/client';
import { loadConfigOrExit, taskQueues } from '../config/index.js';
import { createPollingServices } from '../app/pollingServices.js';
import { createRuntimeDeps } from '../runtime/deps.js';
import { startApiServer } from './start.js';
import { assertSafeApiBinding, UnsafeApiBindingError } from './bindCheck.js';

const config = loadConfigOrExit();
try {
  assertSafeApiBinding(config);
} catch (error) {
  if (!(error instanceof UnsafeApiBindingError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(2);
}
const deps = await createRuntimeDeps(config, { name: 'card-poller-api' });
// Lazy: the API starts (and /readyz reports Temporal down) even when Temporal is unreachable.
const connection = Connection.lazy({ address: config.TEMPORAL_ADDRESS });
const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
const services = createPollingServices({ deps });
const api = await startApiServer(config, deps, services, { client, taskQueues: taskQueues(config), workflowIdPrefix: config.WORKFLOW_ID_PREFIX });
process.stderr.write(`card-poller API on ${api.url} (docs at ${api.url}/docs)\n`);

let stopping = false;
const stop = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  await api.close();
  await connection.close();
  await deps.close();
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
