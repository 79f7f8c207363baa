/**
 * Samples every carrier account's status every few seconds into the history rings, so a page
 * opened now shows the last 15 minutes instead of starting empty.
 *
 * Sampling starts with the first history request and pauses when nobody has asked for a while:
 * an API nobody watches (and every API test server) does no dashboard work. Ticks run one after
 * another, never overlapping, so a slow status (a scheduler that does not answer its query) delays
 * the next sample instead of piling queries up.
 */
import { SampleRing, type StatusSample } from './history.js';

export interface StatusSource {
  /** Accounts to sample now. */
  carrierIds(): Promise<string[]>;
  sample(carrierId: string, now: number): Promise<StatusSample>;
}

export interface SamplerOptions {
  readonly everyMs: number;
  readonly windowMs: number;
  /** Sampling pauses when no history was requested for this long. */
  readonly idleAfterMs: number;
  readonly now?: () => number;
  readonly onError?: (error: unknown, carrierId?: string) => void;
}

export interface History {
  readonly sampleEveryMs: number;
  readonly windowMs: number;
  readonly carriers: Record<string, StatusSample[]>;
}

export class StatusSampler {
  private readonly rings = new Map<string, SampleRing>();
  private readonly now: () => number;
  private lastWanted = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly source: StatusSource,
    private readonly options: SamplerOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  private get capacity(): number {
    return Math.max(1, Math.ceil(this.options.windowMs / this.options.everyMs));
  }

  /** Marks the history as wanted; starts sampling (with an immediate first sample) when paused. */
  want(): void {
    this.lastWanted = this.now();
    if (this.stopped || this.timer !== undefined || this.running !== undefined) return;
    this.loop();
  }

  /** Samples newer than `since` per account, oldest first, within the window. */
  history(since?: number): History {
    const horizon = this.now() - this.options.windowMs;
    const after = since === undefined ? horizon : Math.max(since, horizon);
    const carriers: Record<string, StatusSample[]> = {};
    for (const [carrierId, ring] of this.rings) carriers[carrierId] = ring.since(after);
    return { sampleEveryMs: this.options.everyMs, windowMs: this.options.windowMs, carriers };
  }

  /** One round over every account; exposed so tests drive it without timers. */
  async tick(): Promise<void> {
    const now = this.now();
    let ids: string[];
    try {
      ids = await this.source.carrierIds();
    } catch (error) {
      this.options.onError?.(error);
      return;
    }
    for (const id of this.rings.keys()) if (!ids.includes(id)) this.rings.delete(id);
    const samples = await Promise.allSettled(ids.map(async (id) => [id, await this.source.sample(id, now)] as const));
    samples.forEach((result, index) => {
      if (result.status === 'rejected') {
        this.options.onError?.(result.reason, ids[index]);
        return;
      }
      const [id, sample] = result.value;
      let ring = this.rings.get(id);
      if (ring === undefined) {
        ring = new SampleRing(this.capacity);
        this.rings.set(id, ring);
      }
      ring.push(sample);
    });
  }

  private loop(): void {
    this.timer = undefined;
    if (this.stopped || this.now() - this.lastWanted > this.options.idleAfterMs) return;
    this.running = this.tick().finally(() => {
      this.running = undefined;
      if (this.stopped) return;
      this.timer = setTimeout(() => this.loop(), this.options.everyMs);
      // Sampling alone must not keep a process alive.
      this.timer.unref();
    });
  }

  /** Stops sampling and waits for a round in progress, so connections can close after it. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
