/**
 * The loop that applies stored carrier events (src/events/applier.ts) in the ingest worker's
 * process: batch after batch while the backlog holds a full one, a short pause when it is empty or
 * the database fails. Every process running an ingest worker runs one; they share the backlog.
 */
import { backoffMs } from '../ingest/failures.js';
import { describeFailure } from '../db/errors.js';
import { applyPendingEvents, type EventApplierDeps } from './applier.js';
import type { EventCounter } from './metrics.js';

export interface EventApplierLoopOptions extends EventApplierDeps {
  readonly batchSize?: number;
  /** Pause when the backlog is empty: the most a pushed event waits before it is applied. */
  readonly idleMs?: number;
  readonly count?: EventCounter;
  readonly log: (line: string) => void;
}

const DEFAULT_BATCH = 500;
const DEFAULT_IDLE_MS = 200;
const LOG_EVERY_MS = 10_000;

export class EventApplierLoop {
  private stopping = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;

  constructor(private readonly options: EventApplierLoopOptions) {}

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    const batchSize = this.options.batchSize ?? DEFAULT_BATCH;
    let failures = 0;
    let lastLogAt = Number.NEGATIVE_INFINITY;
    while (!this.stopping) {
      let pauseMs = 0;
      try {
        const batch = await applyPendingEvents(this.options, batchSize);
        failures = 0;
        this.options.count?.('applied', batch.applied);
        this.options.count?.('unknown_card', batch.unknownCard);
        if (batch.events < batchSize) pauseMs = this.options.idleMs ?? DEFAULT_IDLE_MS;
      } catch (error) {
        // The events stay pending (the batch rolled back): applied once the database or Redis answers.
        failures += 1;
        if (Date.now() - lastLogAt >= LOG_EVERY_MS) {
          lastLogAt = Date.now();
          this.options.log(`events: applying a batch failed (attempt ${failures}), retrying: ${describeFailure(error)}`);
        }
        pauseMs = backoffMs(failures, { maxMs: 5000 });
      }
      if (pauseMs > 0 && !this.stopping) await this.pause(pauseMs);
    }
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
