/**
 * A small TTL cache whose loads are shared: while a key's value is being loaded, every caller
 * waits for that one load instead of firing its own query (a card worker runs hundreds of
 * activities at once, and all of them ask at every expiry). A failed load is not kept.
 *
 * Stale-if-error (optional): when a reload fails with an error `staleIfError` accepts (the
 * database unreachable), the last good value is served instead, for another TTL before the next
 * reload is tried — polling must not stop because reference data that changes a few times a day
 * could not be re-read for a minute (docs/design.md, 'PostgreSQL and records'). Errors it does not
 * accept are thrown as before, and a key that never loaded has nothing to fall back on. `onStale`
 * hears each key go stale once and come back once, so an outage is logged in two lines, not one per
 * call.
 */
export interface LoadingCacheOptions<K> {
  readonly now?: () => number;
  /** Which load failures may be answered with the last good value. */
  readonly staleIfError?: (error: unknown) => boolean;
  /** A key started (`stale: true`, with the error) or stopped serving its last good value. */
  readonly onStale?: (key: K, stale: boolean, error?: unknown) => void;
}

interface Entry<V> {
  readonly value: Promise<V>;
  /** When the value loaded (null while loading); an expired or invalidated entry reloads. */
  at: number | null;
}

export class LoadingCache<K, V> {
  private readonly entries = new Map<K, Entry<V>>();
  /** The last value each key loaded: kept across failures, expiry and invalidation. */
  private readonly lastGood = new Map<K, { readonly value: V }>();
  private readonly staleKeys = new Set<K>();
  private readonly options: LoadingCacheOptions<K>;
  private readonly now: () => number;

  constructor(
    private readonly ttlMs: number,
    options: LoadingCacheOptions<K> | (() => number) = {},
  ) {
    // Older callers pass the clock alone.
    this.options = typeof options === 'function' ? { now: options } : options;
    this.now = this.options.now ?? Date.now;
  }

  /** The cached value, the pending load, or a new load; `refresh` always starts a new load. */
  get(key: K, load: () => Promise<V>, refresh = false): Promise<V> {
    const entry = this.entries.get(key);
    if (entry && !refresh && (entry.at === null || this.now() - entry.at < this.ttlMs)) return entry.value;
    const fresh: Entry<V> = { value: this.loadOrStale(key, load), at: null };
    this.entries.set(key, fresh);
    fresh.value.then(
      () => {
        fresh.at = this.now();
      },
      () => {
        // Only drop the entry if a later load has not replaced it already.
        if (this.entries.get(key) === fresh) this.entries.delete(key);
      },
    );
    return fresh.value;
  }

  /** Whether `key` is being served from its last good value (its reload failed). */
  isStale(key: K): boolean {
    return this.staleKeys.has(key);
  }

  /**
   * Every key reloads at its next read (after a configuration change). The last good values are
   * kept: a reload that meets an unreachable database still has them to fall back on.
   */
  expireAll(): void {
    for (const [key, entry] of this.entries) {
      // A load already under way may have read the old value: the next read starts its own.
      if (entry.at === null) this.entries.delete(key);
      else entry.at = Number.NEGATIVE_INFINITY;
    }
  }

  /** Forgets everything, last good values included. */
  clear(): void {
    this.entries.clear();
    this.lastGood.clear();
    this.staleKeys.clear();
  }

  private async loadOrStale(key: K, load: () => Promise<V>): Promise<V> {
    try {
      const value = await load();
      this.lastGood.set(key, { value });
      if (this.staleKeys.delete(key)) this.options.onStale?.(key, false);
      return value;
    } catch (error) {
      const last = this.lastGood.get(key);
      if (!last || !this.options.staleIfError?.(error)) throw error;
      if (!this.staleKeys.has(key)) {
        this.staleKeys.add(key);
        this.options.onStale?.(key, true, error);
      }
      return last.value;
    }
  }
}
