/**
 * A least-recently-used map with a size bound: what a process remembers of rows it read, for use
 * only when the database cannot be asked (src/activities/card.ts). Map iteration order is
 * insertion order, so re-inserting on use keeps the oldest entry first, and evicting it is O(1).
 */
export class BoundedCache<K, V> {
  private readonly entries = new Map<K, V>();

  constructor(private readonly maxEntries: number) {
    if (!(maxEntries >= 1)) throw new Error('BoundedCache needs room for at least one entry');
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, value);
    return value;
  }

  set(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
  }

  delete(key: K): void {
    this.entries.delete(key);
  }
}
