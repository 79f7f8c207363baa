/**
 * carrierScheduler's queue of request-check signals: new ones in arrival order, and the ones whose
 * activity failed, kept for a retry ahead of them (they are older). Batches take the retries
 * first, then new signals, at most `maxPerBatch` in all; one batch at a time. It holds at most
 * `capacity` requests: a push beyond is refused. Pure.
 */
import type { RequestCheckInput } from '../../workflow-safe/requestCheck.js';

export class SignalQueue {
  private readonly pending: RequestCheckInput[];
  // Signal request-checks whose activity failed: kept (in arrival order) and tried again next tick.
  private readonly retry: RequestCheckInput[] = [];
  private running = false;

  /** `carried`: the previous run's queue (retries first), in the order it handed them over. */
  constructor(
    carried: readonly RequestCheckInput[],
    private readonly maxPerBatch: number,
    private readonly capacity: number,
  ) {
    // A queue carried from a run before the bound is kept whole: it only shrinks from here.
    this.pending = [...carried];
  }

  /** Queues a request; false when the queue is full (the request is not queued). */
  push(request: RequestCheckInput): boolean {
    if (this.size >= this.capacity) return false;
    this.pending.push(request);
    return true;
  }

  /** Requests queued, new and to retry (a batch under way not counted: it comes back only as retries). */
  get size(): number {
    return this.pending.length + this.retry.length;
  }

  /** Signals that arrived and were never tried (a retry waits for its tick; a new one may wake the loop). */
  get hasNew(): boolean {
    return this.pending.length > 0;
  }

  /** Any request waits, new or to retry. */
  get hasQueued(): boolean {
    return this.pending.length > 0 || this.retry.length > 0;
  }

  /** A batch taken by {@link takeBatch} is being handled. */
  get batchRunning(): boolean {
    return this.running;
  }

  /** Every queued signal, retries first (runs before the claim-first patch take them all, before the claim). */
  takeAll(): RequestCheckInput[] {
    return [...this.retry.splice(0, this.retry.length), ...this.pending.splice(0, this.pending.length)];
  }

  /** The next batch (the oldest first, at most maxPerBatch), marked running; none when one is under way or nothing is queued. */
  takeBatch(): RequestCheckInput[] | undefined {
    if (this.running) return undefined;
    const batch = this.retry.splice(0, this.maxPerBatch);
    batch.push(...this.pending.splice(0, this.maxPerBatch - batch.length));
    if (batch.length === 0) return undefined;
    this.running = true;
    return batch;
  }

  batchDone(): void {
    this.running = false;
  }

  /** Requests to try again: ahead of the signals still queued (they are older, and a card's later requests may be among those). */
  requeue(requests: readonly RequestCheckInput[]): void {
    this.retry.unshift(...requests);
  }

  /** What the next run takes over: retries first, then new signals. */
  carried(): RequestCheckInput[] {
    return [...this.retry, ...this.pending];
  }
}

/**
 * A batch by card, each card's requests in arrival order (they merge into one priority item, so
 * they run one after another), the cards in order of their first request (they run in parallel).
 */
export function requestsByCard(batch: readonly RequestCheckInput[]): RequestCheckInput[][] {
  const byCard = new Map<string, RequestCheckInput[]>();
  for (const request of batch) byCard.set(request.cardId, [...(byCard.get(request.cardId) ?? []), request]);
  return [...byCard.values()];
}
