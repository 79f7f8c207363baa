/**
 * A small TTL cache whose loads are shared: while a key's value is being loaded, every caller
 * waits for that one load instead of firing its own query (a card worker runs hundreds of
 * activities at once, and all of them ask at every expiry). A failed load is not kept.
 */
export class LoadingCache<K, V> {
  private readonly entries = new Map<K, { readonly value: Promise<V>; at: number | null }>();

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The cached value, the pending load, or a new load; `refresh` always starts a new load. */
  get(key: K, load: () => Promise<V>, refresh = false): Promise<V> {
    const entry = this.entries.get(key);
    if (entry && !refresh && (entry.at === null || this.now() - entry.at < this.ttlMs)) return entry.value;
    const value = load();
    const fresh: { readonly value: Promise<V>; at: number | null } = { value, at: null };
    this.entries.set(key, fresh);
    value.then(
      () => {
        fresh.at = this.now();
      },
      () => {
        // Only drop the entry if a later load has not replaced it already.
        if (this.entries.get(key) === fresh) this.entries.delete(key);
      },
    );
    return value;
  }

  clear(): void {
    this.entries.clear();
  }
}
