/**
 * The failure state of a long-running loop (pollingControl, carrierScheduler), without the
 * logging and metrics loopFailures adds: which activity failed last, how many in a row, and how
 * long the loop backs off. Pure (time is passed in), so its decisions are unit-tested.
 */
import type { LoopFailure } from '../workflow-safe/loopStatus.js';

/** The longest backoff: an outage of minutes is noticed over within half a minute of its end. */
export const MAX_BACKOFF_MS = 30_000;

export class FailureStreak {
  private last: LoopFailure | undefined;
  private failing = false;
  // Failures of the loop's own step in a row: only they lengthen the backoff (others, such as a
  // signal's request-check, are reported in `last` but must not push the loop's next wait to 30 s).
  private backoffStreak = 0;

  /** `baseMs`: the first backoff is twice this, each next one doubles, up to {@link MAX_BACKOFF_MS}. */
  constructor(private readonly baseMs: number) {}

  /**
   * A failed activity at `atMs` (workflow time). `backoff`: the loop's own step failed (its next
   * attempt waits); others are only reported. Returns the failures in a row, this one included.
   */
  record(activity: string, message: string, atMs: number, options: { backoff?: boolean } = {}): number {
    const consecutive = (this.last?.consecutive ?? 0) + 1;
    this.last = { activity, message, at: new Date(atMs).toISOString(), consecutive };
    if (options.backoff ?? true) {
      this.failing = true;
      this.backoffStreak += 1;
    }
    return consecutive;
  }

  /** The loop's step succeeded: no more backoff; the last failure stays reported, with 0 in a row. */
  succeeded(): void {
    if (!this.failing || !this.last) return;
    this.failing = false;
    this.backoffStreak = 0;
    this.last = { ...this.last, consecutive: 0 };
  }

  /** How long to wait before the next attempt while failing; undefined when the last attempt succeeded. */
  backoffMs(): number | undefined {
    if (!this.failing || !this.last) return undefined;
    return Math.min(MAX_BACKOFF_MS, this.baseMs * 2 ** Math.min(this.backoffStreak, 10));
  }

  view(): { lastFailure?: LoopFailure } {
    return this.last === undefined ? {} : { lastFailure: this.last };
  }
}
