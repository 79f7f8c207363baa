/**
 * A process that runs the control worker makes sure pollingControl runs: at start and every
 * `everyMs`, it starts it unless a run is open (USE_EXISTING), and creates the hourly
 * storage-maintenance schedule unless it exists. A run that ended for any reason —
 * terminated after a deploy, failed — is replaced without a person; the schedulers it owns are
 * then reconciled by it. Failures (Temporal away) are logged and tried again at the next period.
 */
import { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { ensurePollingControl, ensureStorageMaintenance, type OrchestrationRef } from '../app/temporalControl.js';
import type { TaskQueueNames } from '../workflow-safe/taskQueues.js';

export interface KeepPollingControlOptions {
  readonly connection: NativeConnection;
  readonly namespace: string;
  readonly taskQueues: TaskQueueNames;
  readonly workflowIdPrefix: string;
  readonly everyMs?: number;
  readonly log: (line: string) => void;
}

export function keepPollingControlRunning(options: KeepPollingControlOptions): { stop(): void } {
  const ref: OrchestrationRef = {
    client: new Client({ connection: options.connection, namespace: options.namespace }),
    taskQueues: options.taskQueues,
    workflowIdPrefix: options.workflowIdPrefix,
  };
  let lastError = '';
  const ensure = (): void => {
    Promise.all([ensurePollingControl(ref), ensureStorageMaintenance(ref)]).then(
      () => void (lastError = ''),
      (error: unknown) => {
        const message = String(error);
        // One line per distinct error, not one per period, while Temporal stays away.
        if (message !== lastError) options.log(`pollingControl could not be ensured (retrying every ${(options.everyMs ?? 30_000) / 1000} s): ${message}`);
        lastError = message;
      },
    );
  };
  ensure();
  const timer = setInterval(ensure, options.everyMs ?? 30_000);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
