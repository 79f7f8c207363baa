/**
 * Exact sliding-window counters. A window is any half-open interval of `windowMs`: two calls are
 * in one window when their arrival times differ by less than `windowMs`. The maximum over windows
 * ending at each arrival is the maximum over all windows, since a window's count only grows at
 * arrivals.
 */
export interface WindowEntry {
  /** When it was recorded (the clock `record` was given). */
  readonly at: number;
  /** What the recorder named it (e.g. which call); empty when unnamed. */
  readonly label: string;
}

export class SlidingWindow {
  private times: number[] = [];
  private labels: string[] = [];
  private head = 0;
  private maxSeen = 0;
  private worstSeen: readonly WindowEntry[] = [];

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

  record(now: number, label = ''): void {
    this.evict(now);
    this.times.push(now);
    this.labels.push(label);
    const count = this.times.length - this.head;
    if (count > this.maxSeen) {
      this.maxSeen = count;
      // Copied only when the maximum grows: at most `max` entries, at most `max` times.
      this.worstSeen = this.times.slice(this.head).map((at, i) => ({ at, label: this.labels[this.head + i] ?? '' }));
    }
  }

  /** Highest count seen in any window since creation. */
  get max(): number {
    return this.maxSeen;
  }

  /** The events of the first window that held {@link max} of them, oldest first. */
  get worst(): readonly WindowEntry[] {
    return this.worstSeen;
  }

  private evict(now: number): void {
    const times = this.times;
    while (this.head < times.length && now - (times[this.head] ?? now) >= this.windowMs) this.head += 1;
    // Compact now and then so the array does not grow without bound.
    if (this.head > 1024 && this.head * 2 > times.length) {
      this.times = times.slice(this.head);
      this.labels = this.labels.slice(this.head);
      this.head = 0;
    }
  }
}
