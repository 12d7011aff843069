import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Due } from '../../src/invocation/deadline-queue.js';
import { DeadlineQueue } from '../../src/invocation/deadline-queue.js';

interface Entry extends Due {
  name: string;
}

const entry = (name: string, inMs: number): Entry => ({ name, dueAt: performance.now() + inMs, slot: -1 });

/** A queue that notes the names of the entries it expires, in order. */
function recording(): { queue: DeadlineQueue<Entry>; expired: string[] } {
  const expired: string[] = [];
  return { queue: new DeadlineQueue<Entry>((e) => expired.push(e.name)), expired };
}

describe('DeadlineQueue', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('expires entries in deadline order under one timer, each at its own deadline', async () => {
    const { queue, expired } = recording();
    queue.add(entry('c', 30));
    queue.add(entry('a', 10));
    queue.add(entry('b', 20));
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(9);
    expect(expired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(expired).toEqual(['a']);
    await vi.advanceTimersByTimeAsync(10);
    expect(expired).toEqual(['a', 'b']);
    await vi.advanceTimersByTimeAsync(10);
    expect(expired).toEqual(['a', 'b', 'c']);
    expect(queue.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('never expires a removed entry, and ignores an entry it does not hold', async () => {
    const { queue, expired } = recording();
    const a = entry('a', 10);
    const b = entry('b', 10);
    queue.add(a);
    queue.add(b);
    queue.remove(a);
    queue.remove(a);
    queue.remove(entry('stranger', 5));
    expect(a.slot).toBe(-1);
    expect(queue.size).toBe(1);
    await vi.advanceTimersByTimeAsync(10);
    expect(expired).toEqual(['b']);
  });

  it('re-arms for an entry due before the armed deadline', async () => {
    const { queue, expired } = recording();
    queue.add(entry('far', 1000));
    queue.add(entry('near', 5));
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(5);
    expect(expired).toEqual(['near']);
    await vi.advanceTimersByTimeAsync(995);
    expect(expired).toEqual(['near', 'far']);
  });

  it('reaches a deadline past the longest delay Node takes in steps, without firing early', async () => {
    const { queue, expired } = recording();
    queue.add(entry('far', 3_000_000_000));
    await vi.advanceTimersByTimeAsync(2_147_483_647);
    expect(expired).toEqual([]);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(3_000_000_000 - 2_147_483_647);
    expect(expired).toEqual(['far']);
  });

  it('lets an expiry add and remove other entries', async () => {
    const expired: string[] = [];
    const later = entry('later', 50);
    const queue = new DeadlineQueue<Entry>((e) => {
      expired.push(e.name);
      if (e.name === 'first') {
        queue.remove(later);
        queue.add(entry('added', 5));
      }
    });
    queue.add(entry('first', 10));
    queue.add(later);
    await vi.advanceTimersByTimeAsync(10);
    expect(expired).toEqual(['first']);
    await vi.advanceTimersByTimeAsync(100);
    expect(expired).toEqual(['first', 'added']);
  });

  it('drain takes every entry out and turns the timer off', async () => {
    const { queue, expired } = recording();
    const all = [entry('a', 10), entry('b', 20)];
    for (const e of all) queue.add(e);
    expect(queue.drain().map((e) => e.name).sort()).toEqual(['a', 'b']);
    expect(all.map((e) => e.slot)).toEqual([-1, -1]);
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(100);
    expect(expired).toEqual([]);
  });

  it('keeps its order through many adds and removes (checked against a sorted list)', async () => {
    const { queue, expired } = recording();
    let seed = 7;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const live: Entry[] = [];
    for (let i = 0; i < 2000; i++) {
      if (live.length > 0 && random() < 0.4) {
        const [gone] = live.splice(Math.floor(random() * live.length), 1);
        queue.remove(gone as Entry);
      } else {
        const e = entry(`e${i}`, 1 + Math.floor(random() * 500));
        live.push(e);
        queue.add(e);
      }
    }
    expect(queue.size).toBe(live.length);
    // One millisecond at a time: an entry the heap lost track of would expire late, or never.
    const start = performance.now();
    const firedAt = new Map<string, number>();
    for (let ms = 1; ms <= 501; ms++) {
      await vi.advanceTimersByTimeAsync(1);
      for (const name of expired.splice(0)) firedAt.set(name, performance.now() - start);
    }
    expect(firedAt.size).toBe(live.length);
    for (const e of live) expect(firedAt.get(e.name)).toBe(Math.ceil(e.dueAt - start));
  });
});
