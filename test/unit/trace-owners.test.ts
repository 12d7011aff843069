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

  it('forgets the oldest trace first once full, ambiguous ones included; a repeat does not take a second slot', () => {
    const owners = new RecentTraceOwners(3);
    owners.note(trace(1), 'w-1');
    owners.note(trace(2), 'w-2');
    owners.note(trace(2), 'w-3'); // ambiguous, same slot
    owners.note(trace(1), 'w-1'); // a repeat: still the oldest
    owners.note(trace(3), 'w-3');
    expect(owners.size).toBe(3);
    owners.note(trace(4), 'w-4');
    expect(owners.ownerOf(trace(1))).toBeUndefined();
    expect(owners.ownerOf(trace(2))).toBeNull();
    owners.note(trace(5), 'w-5');
    expect(owners.ownerOf(trace(2))).toBeUndefined();
    expect([3, 4, 5].map((n) => owners.ownerOf(trace(n)))).toEqual(['w-3', 'w-4', 'w-5']);
    expect(owners.size).toBe(3);
    // Forgotten, a trace starts again: the worker it goes to next is its one worker.
    owners.note(trace(2), 'w-9');
    expect(owners.ownerOf(trace(2))).toBe('w-9');
    expect(owners.ownerOf(trace(3))).toBeUndefined();
  });

  it('holds at most its capacity however many traces pass (4,096 by default)', () => {
    const owners = new RecentTraceOwners();
    for (let n = 1; n <= TRACE_OWNERS_CAPACITY + 500; n++) owners.noteTraceparent(traceparent(n), `w-${n % 7}`);
    expect(owners.size).toBe(TRACE_OWNERS_CAPACITY);
    expect(owners.ownerOf(trace(500))).toBeUndefined();
    expect(owners.ownerOf(trace(501))).toBe(`w-${501 % 7}`);
    expect(owners.ownerOf(trace(TRACE_OWNERS_CAPACITY + 500))).toBe(`w-${(TRACE_OWNERS_CAPACITY + 500) % 7}`);
  });

  it('ignores a traceparent that is not shaped vv-<trace id>-…', () => {
    const owners = new RecentTraceOwners();
    owners.noteTraceparent('garbage', 'w-1');
    owners.noteTraceparent(`00${trace(1)}-b7ad6b7169203331-01-`, 'w-1');
    owners.noteTraceparent(`00-${trace(1)}`, 'w-1');
    expect(owners.size).toBe(0);
    expect(() => new RecentTraceOwners(0)).toThrow(/positive integer/);
  });
});
