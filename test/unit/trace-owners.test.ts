import { describe, expect, it } from 'vitest';
import { RecentTraceOwners, TRACE_OWNERS_CAPACITY } from '../../src/observability/trace-owners.js';

const trace = (n: number): string => n.toString(16).padStart(32, '0');
const traceparent = (n: number): string => `00-${trace(n)}-b7ad6b7169203331-01`;

describe('RecentTraceOwners', () => {
  it('names the one worker a trace went to, from the traceparent the engine sent', () => {
    const owners = new RecentTraceOwners();
    owners.noteTraceparent(traceparent(1), 'w-1');
    owners.noteTraceparent(traceparent(1), 'w-1');
    expect(owners.ownerOf(trace(1))).toBe('w-1');
    expect(owners.ownerOf(trace(2))).toBeUndefined();
    expect(owners.size).toBe(1);
  });

  it('a trace that went to several workers is ambiguous (null), and stays so', () => {
    const owners = new RecentTraceOwners();
    owners.noteTraceparent(traceparent(1), 'w-1');
    owners.noteTraceparent(traceparent(1), 'w-2');
    expect(owners.ownerOf(trace(1))).toBeNull();
    owners.noteTraceparent(traceparent(1), 'w-1');
    expect(owners.ownerOf(trace(1))).toBeNull();
  });

  it('remembers a trace until `capacity` more invocations were noted after its last one; a repeat renews it, ambiguity included', () => {
    const owners = new RecentTraceOwners(3);
    owners.note(trace(1), 'w-1');
    owners.note(trace(2), 'w-2');
    owners.note(trace(2), 'w-3'); // ambiguous
    owners.note(trace(1), 'w-1'); // a repeat: trace 1 is now the newest
    owners.note(trace(3), 'w-3');
    expect(owners.size).toBe(3);
    expect(owners.ownerOf(trace(1))).toBe('w-1');
    owners.note(trace(4), 'w-4');
    expect(owners.ownerOf(trace(2))).toBeUndefined();
    expect(owners.ownerOf(trace(1))).toBe('w-1');
    owners.note(trace(5), 'w-5');
    expect(owners.ownerOf(trace(1))).toBeUndefined();
    expect([3, 4, 5].map((n) => owners.ownerOf(trace(n)))).toEqual(['w-3', 'w-4', 'w-5']);
    expect(owners.size).toBe(3);
    // Forgotten, a trace starts again: the worker it goes to next is its one worker.
    owners.note(trace(2), 'w-9');
    expect(owners.ownerOf(trace(2))).toBe('w-9');
    expect(owners.ownerOf(trace(3))).toBeUndefined();
  });

  it('notes without a lookup between them are indexed when one comes, the same as with lookups between them', () => {
    // The same notes into two memories: one looked up after every note, one only at the end.
    const notes: [number, string][] = [];
    for (let i = 0; i < 40; i++) notes.push([i % 7 === 0 ? 1 : 10 + (i % 5), `w-${i % 3 === 0 ? 'a' : 'b'}`]);
    notes.push([1, 'w-a'], [12, 'w-b'], [1, 'w-a']);
    const eager = new RecentTraceOwners(8);
    const lazy = new RecentTraceOwners(8);
    for (const [n, worker] of notes) {
      eager.note(trace(n), worker);
      eager.ownerOf(trace(n));
      lazy.note(trace(n), worker);
    }
    for (const n of [1, 10, 11, 12, 13, 14, 99]) expect(lazy.ownerOf(trace(n))).toBe(eager.ownerOf(trace(n)));
    expect(lazy.size).toBe(eager.size);
    // Among the last 8 notes (35 to 42) trace 1 went to w-b (35) and w-a (40, 42); trace 12 only to w-b.
    expect(lazy.ownerOf(trace(1))).toBeNull();
    expect(lazy.ownerOf(trace(12))).toBe('w-b');
  });

  it('a trace noted long before its next note is not ambiguous by that old note, even when nothing looked it up between', () => {
    const owners = new RecentTraceOwners(3);
    owners.note(trace(1), 'w-1');
    for (let n = 2; n < 20; n++) owners.note(trace(n), 'w-2');
    owners.note(trace(1), 'w-3');
    expect(owners.ownerOf(trace(1))).toBe('w-3');
  });

  it('forgets a trace `capacity` notes later while traces pass between lookups', () => {
    const owners = new RecentTraceOwners(4);
    for (let n = 1; n <= 1000; n++) {
      owners.noteTraceparent(traceparent(n), `w-${n % 2}`);
      expect(owners.ownerOf(trace(n))).toBe(`w-${n % 2}`);
      expect(owners.ownerOf(trace(n - 3))).toBe(n > 3 ? `w-${(n - 3) % 2}` : undefined);
      expect(owners.ownerOf(trace(n - 4))).toBeUndefined();
    }
    expect(owners.size).toBe(4);
  });

  it('keeps no text of what it noted: only the worker ids (a noted traceparent may be a slice holding a whole frame)', () => {
    const owners = new RecentTraceOwners(16);
    const frames = Array.from({ length: 40 }, (_, n) => `{"traceparent":"${traceparent(n)}","body":"${'x'.repeat(200)}"}`);
    for (const [n, frame] of frames.entries()) owners.noteTraceparent(frame.slice(16, 71), `w-${n % 3}`);
    expect(owners.ownerOf(trace(39))).toBe('w-0');
    const strings: string[] = [];
    const walk = (value: unknown, depth: number): void => {
      if (typeof value === 'string') strings.push(value);
      else if (depth < 3 && typeof value === 'object' && value !== null && !ArrayBuffer.isView(value)) for (const inner of Object.values(value)) walk(inner, depth + 1);
    };
    walk(owners, 0);
    expect(new Set(strings)).toEqual(new Set(['w-0', 'w-1', 'w-2']));
  });

  it('holds at most its capacity however many traces pass (4,096 by default)', () => {
    const owners = new RecentTraceOwners();
    for (let n = 1; n <= TRACE_OWNERS_CAPACITY + 500; n++) owners.noteTraceparent(traceparent(n), `w-${n % 7}`);
    expect(owners.size).toBe(TRACE_OWNERS_CAPACITY);
    expect(owners.ownerOf(trace(500))).toBeUndefined();
    expect(owners.ownerOf(trace(501))).toBe(`w-${501 % 7}`);
    expect(owners.ownerOf(trace(TRACE_OWNERS_CAPACITY + 500))).toBe(`w-${(TRACE_OWNERS_CAPACITY + 500) % 7}`);
  });

  it('ignores a traceparent that is not shaped vv-<trace id>-…, and trace ids that are not 32 lowercase hex digits', () => {
    const owners = new RecentTraceOwners();
    owners.noteTraceparent('garbage', 'w-1');
    owners.noteTraceparent(`00${trace(1)}-b7ad6b7169203331-01-`, 'w-1');
    owners.noteTraceparent(`00-${trace(1)}`, 'w-1');
    owners.noteTraceparent(`00-${'ABCDEF'.padStart(32, '0')}-b7ad6b7169203331-01`, 'w-1');
    owners.noteTraceparent(`00-${'g'.padStart(32, '0')}-b7ad6b7169203331-01`, 'w-1');
    owners.note(trace(1).slice(1), 'w-1');
    expect(owners.size).toBe(0);
    expect(owners.ownerOf('ABCDEF'.padStart(32, '0'))).toBeUndefined();
    expect(owners.ownerOf('not a trace id')).toBeUndefined();
    owners.note('ffffffff'.repeat(4), 'w-2');
    expect(owners.ownerOf('ffffffff'.repeat(4))).toBe('w-2');
    expect(owners.ownerOf('ffffffff'.repeat(3) + 'fffffffe')).toBeUndefined();
    expect(() => new RecentTraceOwners(0)).toThrow(/positive integer/);
  });
});
