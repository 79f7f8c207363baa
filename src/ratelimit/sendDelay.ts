/**
 * Per-process estimate of the grant-to-send delay: how long after its slot a granted call really
 * leaves this process (timer lateness, the confirm round trip, a wait for a free socket). It
 * sizes the window margin: each call's slot counts in the limiter until slot + margin, and a call
 * not sent within it goes back for a new slot, so the margin only needs to cover this process's
 * usual delay, not the worst one. A fixed 100 ms margin cost ~9 % of every budget.
 */

/**
 * Floor: what the way from our socket to the carrier's clock may add (not measurable here). At
 * 10 ms a carrier enforcing its rate on arrival refused a call now and then when its own event
 * loop was a little late (seen against the simulator: two refusals in a minute at 6 QPS).
 */
export const MIN_WINDOW_MARGIN_MS = 30;
/** Cap; lua/rateLimit.lua's MAX_TOLERANCE is the same and clamps whatever a caller sends. */
export const MAX_WINDOW_MARGIN_MS = 100;
/** Part of the margin kept for socket → carrier: a call must be sent this long before its margin ends. */
export const ARRIVAL_ALLOWANCE_MS = 20;
/**
 * The percentile of a few seconds' samples underestimates the next spike, and a call that misses
 * its margin costs more than a little margin does: its slot is lost (later calls are already
 * booked one window after it) and it queues behind them. Measured with 4 processes on 2 busy cores:
 * at 1× the 99th percentile a batch missed every few seconds (≈ 80–90 % of the rate used), at 1.5×
 * none did (≈ 97 %).
 */
export const MARGIN_HEADROOM = 1.5;

export interface SendDelayOptions {
  /** Most samples kept. @default 256 */
  readonly size?: number;
  /** Samples older than this are dropped: the margin follows the process's current load. @default 5000 */
  readonly horizonMs?: number;
  /** Share of calls the margin covers without a new slot. @default 0.99 */
  readonly percentile?: number;
  /** Below this many samples the margin stays where it is (the cap at start). @default 4 */
  readonly minSamples?: number;
  /** Clock (epoch ms); tests pass their own. */
  readonly now?: () => number;
}

/** 1 ms buckets up to the cap. */
const BUCKETS = MAX_WINDOW_MARGIN_MS + 1;

/**
 * The percentile of the recent delays (the last `size`, none older than `horizonMs`), from a
 * histogram of 1 ms buckets: O(1) per sample, so the margin can follow every call. The margin only
 * trades budget against calls that need a new slot — safety comes from those calls never being
 * sent — so it may adapt quickly, and a slow start (JIT, cold connections) is soon forgotten.
 */
export class SendDelays {
  private readonly buckets: Uint8Array;
  private readonly times: Float64Array;
  private readonly histogram = new Uint32Array(BUCKETS);
  private readonly horizonMs: number;
  private readonly percentile: number;
  private readonly minSamples: number;
  private readonly now: () => number;
  /** Ring: `count` samples ending just before `next`. */
  private next = 0;
  private count = 0;
  private current = MAX_WINDOW_MARGIN_MS;
  private stale = false;

  constructor(options: SendDelayOptions = {}) {
    const size = options.size ?? 256;
    this.buckets = new Uint8Array(size);
    this.times = new Float64Array(size);
    this.horizonMs = options.horizonMs ?? 5000;
    this.percentile = options.percentile ?? 0.99;
    this.minSamples = options.minSamples ?? 4;
    this.now = options.now ?? Date.now;
  }

  /** One call's delay from its slot to the moment it was sent (or found it could not be). */
  record(delayMs: number): void {
    // A stall beyond the cap (the process or Redis blocked) says nothing about the margin: no
    // margin could have covered it, and the call got a new slot anyway.
    if (delayMs > MAX_WINDOW_MARGIN_MS) return;
    const at = this.now();
    this.expire(at);
    if (this.count === this.buckets.length) this.dropOldest();
    const bucket = Math.max(0, Math.ceil(delayMs));
    this.buckets[this.next] = bucket;
    this.times[this.next] = at;
    this.histogram[bucket]! += 1;
    this.next = (this.next + 1) % this.buckets.length;
    this.count += 1;
    this.stale = true;
  }

  /** Margin (ms): the percentile of recent delays with headroom, plus the arrival allowance, within [floor, cap]. */
  marginMs(): number {
    this.expire(this.now());
    if (this.stale && this.count >= this.minSamples) {
      this.stale = false;
      // Walk down from the top until more than (1 − percentile) of the samples lie above.
      const allowedAbove = Math.floor((1 - this.percentile) * this.count);
      let above = 0;
      let bucket = BUCKETS - 1;
      for (; bucket > 0; bucket -= 1) {
        above += this.histogram[bucket]!;
        if (above > allowedAbove) break;
      }
      this.current = Math.min(MAX_WINDOW_MARGIN_MS, Math.max(MIN_WINDOW_MARGIN_MS, Math.ceil(bucket * MARGIN_HEADROOM) + ARRIVAL_ALLOWANCE_MS));
    }
    return this.current;
  }

  private expire(at: number): void {
    while (this.count > 0 && this.times[this.oldest()]! < at - this.horizonMs) this.dropOldest();
  }

  private oldest(): number {
    return (this.next - this.count + this.buckets.length) % this.buckets.length;
  }

  private dropOldest(): void {
    this.histogram[this.buckets[this.oldest()]!]! -= 1;
    this.count -= 1;
    this.stale = true;
  }
}
