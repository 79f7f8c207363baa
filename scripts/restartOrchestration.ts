/**
 * `npm run orchestration:restart`: ends the running pollingControl, carrierScheduler and (with
 * --cards) cardCheck runs of this deployment and starts pollingControl again.
 *
 * Use it after deploying workflow code that changed what the workflows do (otherwise running
 * runs replay the new code against their old history and fail as non-deterministic). It is safe
 * because Redis, not Temporal, owns claims and due times: a terminated card run's lease expires
 * and the card is claimed again; a terminated scheduler loses nothing but its loop position.
 */
import { Client, Connection } from '@temporalio/client';
import { loadConfigOrExit, taskQueues } from '../src/config/index.js';
import { ensurePollingControl } from '../src/app/temporalControl.js';

const HELP = `usage: npm run orchestration:restart [-- --cards]

Terminates the running pollingControl and carrierScheduler workflows of this deployment: those
whose id starts with WORKFLOW_ID_PREFIX, i.e. all of the namespace when the prefix is empty (the
default). Then starts pollingControl again, which starts
one scheduler per enabled account. With --cards, running cardCheck runs are terminated too
(their claims come back when the lease expires).`;

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  process.stdout.write(`${HELP}\n`);
} else {
  const config = loadConfigOrExit();
  const connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS });
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const types = ['pollingControl', 'carrierScheduler', ...(process.argv.includes('--cards') ? ['cardCheck'] : [])];
  const prefix = config.WORKFLOW_ID_PREFIX === '' ? '' : ` AND WorkflowId STARTS_WITH "${config.WORKFLOW_ID_PREFIX}"`;
  const query = `ExecutionStatus = "Running" AND WorkflowType IN (${types.map((t) => `"${t}"`).join(', ')})${prefix}`;
  let terminated = 0;
  for await (const execution of client.workflow.list({ query })) {
    await client.workflow.getHandle(execution.workflowId, execution.runId).terminate('orchestration restart (workflow code deploy)');
    terminated += 1;
  }
  const id = await ensurePollingControl({ client, taskQueues: taskQueues(config), workflowIdPrefix: config.WORKFLOW_ID_PREFIX });
  process.stdout.write(`terminated ${terminated} run(s) of ${types.join(', ')}; started ${id}\n`);
  await connection.close();
}
