/**
 * A Map for keys that come and go and come back (routes and functions of reconnecting workers).
 *
 * V8's Map keeps a deleted entry in its bucket's chain until the table is next rehashed, which it does
 * only when the table fills up: deleting and adding the same key again and again grows that key's chain,
 * and every lookup of it walks the chain. Measured on Node 20 in a Map of 10,000 entries: 0.2 µs per
 * set + delete of distinct keys, but 2 µs per set + delete of one key repeated 2,000 times and 20 µs
 * repeated 100,000 times (docs/scale.md). Here a deleted key keeps its entry, holding `undefined`, so
 * it is found in place when it comes back; when dead entries pass a quarter of the live ones (and 64)
 * the map is copied without them: a cost of the live entries paid once per a quarter as many
 * deletions, O(1) amortised per delete. The quarter bounds what keys that never come back keep (each
 * probe's or deployment's new path): at most live / 4 + 64 dead entries, whatever the history. It
 * was "dead outnumber live" before, and a table of 10,000 routes then kept up to 10,000 dead keys in
 * each of its maps — a creep of ≈ 180 bytes per unique route that came and went, for as long as it
 * took that many to go (docs/scale.md).
 *
 * Read-only users see an ordinary ReadonlyMap of the live entries. A key that comes back keeps its
 * first place in iteration order (nothing here depends on that order).
 */
/** Dead entries always allowed: a small map is not copied for every few deletions. */
const DEAD_SLACK = 64;

export class ChurnMap<K, V> implements ReadonlyMap<K, V> {
  private map = new Map<K, V | undefined>();
  private live = 0;

  get size(): number {
    return this.live;
  }

  /** Entries held, dead ones included: at most size + size / 4 + DEAD_SLACK (a bound check for tests). */
  get held(): number {
    return this.map.size;
  }

  get(key: K): V | undefined {
    return this.map.get(key);
  }

  has(key: K): boolean {
    return this.map.get(key) !== undefined;
  }

  /** `value` must not be undefined (that is what a deleted entry holds). */
  set(key: K, value: V): this {
    if (this.map.get(key) === undefined) this.live++;
    this.map.set(key, value);
    return this;
  }

  delete(key: K): boolean {
    if (this.map.get(key) === undefined) return false;
    this.map.set(key, undefined);
    this.live--;
    const dead = this.map.size - this.live;
    if (dead > DEAD_SLACK && dead > this.live / 4) {
      const kept = new Map<K, V | undefined>();
      for (const [k, v] of this.map) if (v !== undefined) kept.set(k, v);
      this.map = kept;
    }
    return true;
  }

  *entries(): MapIterator<[K, V]> {
    for (const [key, value] of this.map) if (value !== undefined) yield [key, value];
  }

  *keys(): MapIterator<K> {
    for (const [key, value] of this.map) if (value !== undefined) yield key;
  }

  *values(): MapIterator<V> {
    for (const value of this.map.values()) if (value !== undefined) yield value;
  }

  [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }

  forEach(callback: (value: V, key: K, map: ReadonlyMap<K, V>) => void, thisArg?: unknown): void {
    for (const [key, value] of this.entries()) callback.call(thisArg, value, key, this);
  }
}
