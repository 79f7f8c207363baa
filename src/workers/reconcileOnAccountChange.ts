/**
 * The control worker's process asks pollingControl for a reconcile as soon as PostgreSQL announces
 * a carrier-account change (src/db/accountChanges.ts), so an account gets its scheduler within
 * moments of existing whatever created it; the periodic reconcile stays as the safety net. It
 * lives as long as the control worker: every entry point, test stack and bench stack that runs
 * one follows account changes, with no lifecycle of its own.
 */
import { Client, WorkflowNotFoundError } from '@temporalio/client';
import type { NativeConnection, Worker } from '@temporalio/worker';
import { followAccountChanges, type AccountChanges } from '../db/accountChanges.js';
import { pollingControlWorkflowId } from '../workflow-safe/workflowIds.js';
import { reconcileSignal } from '../workflows/messages.js';
import type { LogSink } from '../runtime/logger.js';

/** Notifications within this long of the first become one signal (a burst of account writes). */
export const COALESCE_MS = 200;
const ALIVE_STATES = new Set(['INITIALIZED', 'RUNNING']);
const WATCH_MS = 250;

export interface ReconcileOnAccountChangeOptions {
  readonly connection: NativeConnection;
  readonly namespace: string;
  readonly workflowIdPrefix: string;
  readonly databaseUrl: string;
  readonly schema: string;
  /** The process' logger: failed signals, and the LISTEN connection's errors. */
  readonly logger: Pick<LogSink, 'error' | 'warn' | 'info' | 'debug'>;
}

export function reconcileOnAccountChange(worker: Pick<Worker, 'getState'>, options: ReconcileOnAccountChangeOptions): AccountChanges {
  const handle = new Client({ connection: options.connection, namespace: options.namespace }).workflow.getHandle(
    pollingControlWorkflowId(options.workflowIdPrefix),
  );
  let timer: NodeJS.Timeout | undefined;
  let sending: Promise<void> | undefined;
  let again = false;
  let lastError = '';

  const send = (): void => {
    timer = undefined;
    // One signal in flight at a time; what arrives meanwhile is one more signal after it.
    if (sending) {
      again = true;
      return;
    }
    sending = handle.signal(reconcileSignal).then(
      () => void (lastError = ''),
      (error: unknown) => {
        // pollingControl not running: nothing to reconcile, its next start reconciles anyway.
        if (error instanceof WorkflowNotFoundError) return options.logger.debug(`account change not signalled: ${String(error)}`);
        const message = String(error);
        // A signal failure is not fatal (the periodic reconcile follows): one line per distinct error.
        if (message !== lastError) options.logger.warn(`account change could not be signalled to pollingControl: ${message}`);
        lastError = message;
      },
    );
    void sending.finally(() => {
      sending = undefined;
      if (again) {
        again = false;
        schedule();
      }
    });
  };
  let stopped = false;
  const schedule = (): void => {
    if (!stopped) timer ??= setTimeout(send, COALESCE_MS);
  };

  const changes = followAccountChanges({
    url: options.databaseUrl,
    schema: options.schema,
    applicationName: `account-changes(${options.schema})`.slice(0, 63),
    onChange: schedule,
    logger: options.logger,
  });
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      stopped = true;
      clearInterval(watch);
      clearTimeout(timer);
      timer = undefined;
      await changes.stop();
      await sending;
    })();
    return stopping;
  };
  // Ends with the worker (shutdown, or polls given up), before its connection closes.
  const watch = setInterval(() => {
    if (!ALIVE_STATES.has(worker.getState())) void stop();
  }, WATCH_MS);
  watch.unref();
  return { listening: changes.listening, stop };
}
