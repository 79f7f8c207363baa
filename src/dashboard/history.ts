/**
 * The dashboard's short memory: per carrier account, a fixed-size ring of status samples covering
 * the charts' window. Pure: the sampler feeds it, the history route reads it.
 */

export interface GroupSample {
  readonly name: string;
  /** Calls granted in the last second. */
  readonly used: number;
  readonly effective: number;
  readonly configured: number;
}

export interface StatusSample {
  /** Epoch milliseconds of the sample. */
  readonly t: number;
  readonly callsPerSec: number;
  readonly groups: GroupSample[];
  readonly latenessP50: number;
  readonly latenessP99: number;
  readonly inflight: number;
  readonly priority: number;
  readonly normal: number;
  readonly dueNow: number;
  readonly stretchFactor: number;
}

/** Oldest samples drop out once `capacity` is reached. */
export class SampleRing {
  private readonly slots: (StatusSample | undefined)[];
  private next = 0;
  private size = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError('capacity must be a positive integer');
    this.slots = new Array<StatusSample | undefined>(capacity).fill(undefined);
  }

  push(sample: StatusSample): void {
    this.slots[this.next] = sample;
    this.next = (this.next + 1) % this.capacity;
    this.size = Math.min(this.size + 1, this.capacity);
  }

  /** Samples taken after `since` (all when undefined), oldest first. */
  since(since?: number): StatusSample[] {
    const out: StatusSample[] = [];
    const start = (this.next - this.size + this.capacity) % this.capacity;
    for (let i = 0; i < this.size; i += 1) {
      const sample = this.slots[(start + i) % this.capacity];
      if (sample !== undefined && (since === undefined || sample.t > since)) out.push(sample);
    }
    return out;
  }
}
