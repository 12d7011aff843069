import { describe, expect, it } from 'vitest';
import { ChurnMap } from '../../src/routing/churn-map.js';

describe('ChurnMap', () => {
  it('reads as a map of its live entries, whatever was deleted', () => {
    const map = new ChurnMap<string, number>();
    map.set('a', 1).set('b', 2).set('c', 3);
    expect(map.delete('b')).toBe(true);
    expect(map.delete('b')).toBe(false);
    expect(map.delete('never')).toBe(false);
    expect(map.size).toBe(2);
    expect(map.has('b')).toBe(false);
    expect(map.get('b')).toBeUndefined();
    expect([...map]).toEqual([
      ['a', 1],
      ['c', 3],
    ]);
    expect([...map.keys()]).toEqual(['a', 'c']);
    expect([...map.values()]).toEqual([1, 3]);
    const seen: string[] = [];
    map.forEach((value, key, self) => {
      expect(self).toBe(map);
      seen.push(`${key}=${value}`);
    });
    expect(seen).toEqual(['a=1', 'c=3']);
    // A key that comes back is live again, in its first place.
    map.set('b', 4);
    expect(map.size).toBe(3);
    expect([...map.keys()]).toEqual(['a', 'b', 'c']);
    // Setting a live key again does not count it twice.
    map.set('b', 5);
    expect(map.size).toBe(3);
    expect(map.get('b')).toBe(5);
  });

  it('keeps every live entry when it drops its dead ones', () => {
    const map = new ChurnMap<number, number>();
    for (let i = 0; i < 1000; i++) map.set(i, i);
    for (let i = 0; i < 1000; i += 2) map.delete(i);
    for (let i = 1000; i < 1200; i++) {
      map.set(i, i);
      map.delete(i);
    }
    expect(map.size).toBe(500);
    expect([...map.keys()]).toEqual(Array.from({ length: 500 }, (_, i) => 2 * i + 1));
    expect(map.has(998)).toBe(false);
    expect(map.get(999)).toBe(999);
  });
});

describe('ChurnMap memory', () => {
  it('holds at most a quarter of its live entries (and 64) dead, however many keys came and went', () => {
    const map = new ChurnMap<string, number>();
    for (let i = 0; i < 10_000; i++) map.set(`live/${i}`, i);
    let most = 0;
    for (let i = 0; i < 30_000; i++) {
      map.set(`gone/${i}`, i);
      map.delete(`gone/${i}`);
      most = Math.max(most, map.held);
    }
    expect(map.size).toBe(10_000);
    expect(most).toBeLessThanOrEqual(10_000 + 2_500 + 64 + 1);
    expect(map.get('live/9999')).toBe(9999);
  });

  it('keeps up to 64 dead entries in a small map, and drops them past that', () => {
    const map = new ChurnMap<number, number>();
    map.set(-1, -1);
    for (let i = 0; i < 64; i++) {
      map.set(i, i);
      map.delete(i);
    }
    expect(map.held).toBe(65);
    map.set(64, 64);
    map.delete(64);
    expect(map.held).toBe(1);
    expect([...map]).toEqual([[-1, -1]]);
  });
});
