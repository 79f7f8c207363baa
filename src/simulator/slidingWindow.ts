/**
 * Exact sliding-window counters. A window is any half-open interval of `windowMs`: two calls are
 * in one window when their arrival times differ by less than `windowMs`. The maximum over windows
 * ending at each arrival is the maximum over all windows, since a window's count only grows at
 * arrivals.
 */
export class SlidingWindow {
  private times: number[] = [];
  private head = 0;
  private maxSeen = 0;

  constructor(private readonly windowMs: number) {}

  /** Number of recorded events within the window ending at `now` (exclusive of its start). */
  count(now: number): number {
    this.evict(now);
    return this.times.length - this.head;
  }

  /** Oldest event still in the window ending at `now`, if any. */
  oldest(now: number): number | undefined {
    this.evict(now);
    return this.times[this.head];
  }

  record(now: number): void {
    this.evict(now);
    this.times.push(now);
    this.maxSeen = Math.max(this.maxSeen, this.times.length - this.head);
  }

  /** Highest count seen in any window since creation. */
  get max(): number {
    return this.maxSeen;
  }

  private evict(now: number): void {
    const times = this.times;
    while (this.head < times.length && now - (times[this.head] ?? now) >= this.windowMs) this.head += 1;
    // Compact now and then so the array does not grow without bound.
    if (this.head > 1024 && this.head * 2 > times.length) {
      this.times = times.slice(this.head);
      this.head = 0;
    }
  }
}
