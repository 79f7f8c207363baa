/**
 * Carrier pushback settings (AIMD, see lua/rateLimit.lua). The carrier may enforce less than the
 * configured QPS (the account is shared with other users); on `rate_limited` the group pauses, then
 * runs at a reduced rate that climbs back quickly to just below the rate the carrier last refused
 * and probes above it slowly, backing off again on the next rejection.
 */
export interface PushbackSettings {
  /** Pause when the carrier gives no retry-after. */
  readonly defaultPauseMs: number;
  /** Upper bound of a carrier's retry-after we honour, so a bogus value cannot stall a group. */
  readonly maxPauseMs: number;
  /** Multiplicative decrease on rejection. */
  readonly decreaseFactor: number;
  /** Never below this rate (QPS). */
  readonly minRate: number;
  /** +1 QPS per this many ms while below (refused rate − 1). */
  readonly recoveryStepMs: number;
  /** +1 QPS per this many ms from (refused rate − 1) upward: probing is slow and rare. */
  readonly probeStepMs: number;
  /** Forget pushback state after this long without activity. */
  readonly stateTtlMs: number;
}

export const DEFAULT_PUSHBACK: PushbackSettings = {
  defaultPauseMs: 1000,
  maxPauseMs: 60_000,
  decreaseFactor: 0.5,
  minRate: 1,
  recoveryStepMs: 1000,
  probeStepMs: 30_000,
  stateTtlMs: 3_600_000,
};
