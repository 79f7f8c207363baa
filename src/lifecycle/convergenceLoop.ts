/**
 * What keeps Redis following PostgreSQL's lifecycle in a process that runs the control worker:
 * the outbox relay every LIFECYCLE_OUTBOX_RELAY_INTERVAL_MS (at once again while it finds full
 * batches) and the reconcile every LIFECYCLE_RECONCILE_INTERVAL_MS (one process at a time: its
 * Redis lock). Failures (Redis or PostgreSQL away) are logged once per distinct error and tried
 * again at the next period; the relay's rows wait their backoff.
 */
import type { ApplyDeps } from './apply.js';
import type { LifecycleMetrics } from './metrics.js';
import { relayOutboxOnce, type RelayOptions } from './outboxRelay.js';
import { reconcile, type ReconcileResult } from './reconcile.js';

export interface ConvergenceOptions {
  readonly deps: ApplyDeps;
  readonly metrics?: LifecycleMetrics;
  readonly relayIntervalMs: number;
  readonly reconcileIntervalMs: number;
  readonly relay: RelayOptions;
  readonly reconcileBatchSize?: number;
  readonly log: (line: string) => void;
}

export interface ConvergenceLoop {
  /** Stops both loops and waits for a running pass to end. */
  stop(): Promise<void>;
}

export function keepLifecycleConverged(options: ConvergenceOptions): ConvergenceLoop {
  let stopped = false;
  const errors = new Map<string, string>();
  const report = (what: string, error: unknown): void => {
    const message = error instanceof Error ? error.message : String(error);
    if (errors.get(what) !== message) options.log(`${what} failed (tried again at its next period): ${message}`);
    errors.set(what, message);
  };

  const relayPass = async (): Promise<number> => {
    try {
      const pass = await relayOutboxOnce(options.deps, options.relay, options.metrics);
      if (pass.error) report('lifecycle outbox relay', pass.error);
      else if (pass.applied > 0) errors.delete('lifecycle outbox relay');
      return pass.error ? 0 : pass.claimed;
    } catch (error) {
      report('lifecycle outbox relay', error);
      return 0;
    }
  };
  const reconcilePass = async (): Promise<void> => {
    try {
      const result: ReconcileResult = await reconcile(
        options.deps,
        options.reconcileBatchSize === undefined ? {} : { batchSize: options.reconcileBatchSize },
        options.metrics,
      );
      errors.delete('lifecycle reconcile');
      const repaired = Object.entries(result.repaired).filter(([, count]) => count > 0);
      if (repaired.length > 0)
        options.log(`lifecycle reconcile repaired ${repaired.map(([kind, count]) => `${count} ${kind}`).join(', ')} (${result.checked} cards checked)`);
    } catch (error) {
      report('lifecycle reconcile', error);
    }
  };

  // Sleeps that stop() cuts short; one that begins after stop() (a pass in flight at stop ended)
  // does not begin at all, or stop() would wait out a whole period (the reconcile's is a minute).
  const sleeping = new Set<() => void>();
  const sleep = (ms: number): Promise<void> =>
    new Promise<void>((resolve) => {
      if (stopped) {
        resolve();
        return;
      }
      const wake = (): void => {
        clearTimeout(timer);
        sleeping.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      timer.unref();
      sleeping.add(wake);
    });
  const loop = async (everyMs: number, pass: () => Promise<boolean>): Promise<void> => {
    while (!stopped) {
      // More work waiting (a full batch): go on at once; otherwise wait the period.
      if (!(await pass())) await sleep(everyMs);
    }
  };
  const running = Promise.all([
    loop(options.relayIntervalMs, async () => (await relayPass()) >= options.relay.batchSize),
    // The first reconcile waits one period: at start a rebuild or the relay is the one at work.
    sleep(options.reconcileIntervalMs).then(() =>
      loop(options.reconcileIntervalMs, async () => {
        if (!stopped) await reconcilePass();
        return false;
      }),
    ),
  ]);
  return {
    async stop() {
      stopped = true;
      for (const wake of [...sleeping]) wake();
      await running;
    },
  };
}
