import { describe, expect, it } from 'vitest';
import { RoundRobin } from '../../src/invocation/round-robin.js';

/** How many picks each candidate got, per key. */
function spread(picks: [key: string, candidate: string][]): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  for (const [key, candidate] of picks) {
    const perKey = (out[key] ??= {});
    perKey[candidate] = (perKey[candidate] ?? 0) + 1;
  }
  return out;
}

describe('RoundRobin', () => {
  it('spreads each of several interleaved functions evenly over its own replicas', () => {
    const rr = new RoundRobin();
    const replicas: Record<string, string[]> = { mw: ['a', 'b'], handler: ['a', 'b'], other: ['a', 'b', 'c'] };
    const picks: [string, string][] = [];
    // A middleware and its handler alternate (the pattern a shared turn got wrong), a third function in between.
    for (let i = 0; i < 12; i++) {
      for (const key of ['mw', 'handler', 'other']) picks.push([key, rr.pick(key, replicas[key] as string[]) as string]);
    }
    expect(spread(picks)).toEqual({ mw: { a: 6, b: 6 }, handler: { a: 6, b: 6 }, other: { a: 4, b: 4, c: 4 } });
  });

  it('passes over unusable candidates from the turn on, and falls back to the turn when none is usable', () => {
    const rr = new RoundRobin();
    const closed = new Set(['b']);
    const usable = (candidate: string): boolean => !closed.has(candidate);
    expect([1, 2, 3, 4].map(() => rr.pick('f', ['a', 'b', 'c'], usable))).toEqual(['a', 'c', 'c', 'a']);
    closed.add('a').add('c');
    expect(rr.pick('f', ['a', 'b', 'c'], usable)).toBe('b');
    expect(rr.pick('g', ['only'], () => false)).toBe('only');
    expect(rr.pick('g', [])).toBeUndefined();
  });

  it('keeps a bounded number of turns and forgets on request', () => {
    const rr = new RoundRobin(3);
    for (const key of ['a', 'b', 'c', 'd']) rr.start(key, 2);
    expect(rr.size).toBe(3);
    // 'a' was dropped first: it starts over at 0.
    expect(rr.start('a', 2)).toBe(0);
    expect(rr.start('d', 2)).toBe(1);
    rr.forget('d');
    expect(rr.start('d', 2)).toBe(0);
    expect(rr.start('e', 0)).toBe(0);
  });

  it('keeps no turn for a function with one candidate or none', () => {
    const rr = new RoundRobin();
    for (let i = 0; i < 1000; i++) {
      expect(rr.start(`single${i}`, 1)).toBe(0);
      expect(rr.start(`none${i}`, 0)).toBe(0);
    }
    expect(rr.size).toBe(0);
    // A second replica: the function's turns start then.
    expect([1, 2, 3].map(() => rr.start('single7', 2))).toEqual([0, 1, 0]);
    expect(rr.size).toBe(1);
  });
});
