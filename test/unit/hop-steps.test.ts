import { describe, expect, it } from 'vitest';
import { steps } from '../../bench/hop-times.js';

// Kinds noted by bench/lib/hop-tap.mjs: 1 'request', 2 frame written, 3 frame read, 4 response written, 5 request bytes read.
const notes = (pairs: [number, number][]): { times: number[]; kinds: number[] } => ({ times: pairs.map(([t]) => t), kinds: pairs.map(([, k]) => k) });

describe('steps (bench/hop-times.ts)', () => {
  it('splits each request into the server\'s, the hops\' and the worker\'s steps', () => {
    const server = notes([[100, 5], [108, 1], [120, 2], [170, 3], [185, 4], [300, 5], [309, 1], [322, 2], [380, 3], [392, 4]]);
    const worker = notes([[140, 3], [150, 2], [345, 3], [356, 2]]);
    const found = steps(server, worker);
    expect(found.guard).toEqual([8, 9]);
    expect(found['request → frame']).toEqual([12, 13]);
    expect(found['frame → worker']).toEqual([20, 23]);
    expect(found.worker).toEqual([10, 11]);
    expect(found['worker → result']).toEqual([20, 24]);
    expect(found['result → response']).toEqual([15, 12]);
  });

  it('has no guard step where Node reads the request natively, and skips a request it did not see whole', () => {
    // The first request's result is missing (the window opened mid-request); the second is whole.
    const server = notes([[10, 2], [30, 4], [100, 1], [110, 2], [150, 3], [160, 4]]);
    const worker = notes([[20, 3], [25, 2], [120, 3], [130, 2]]);
    const found = steps(server, worker);
    expect(found.guard).toEqual([]);
    expect(found['request → frame']).toEqual([10]);
    expect(found['frame → worker']).toEqual([10]);
    expect(found.worker).toEqual([10]);
    expect(found['worker → result']).toEqual([20]);
    expect(found['result → response']).toEqual([10]);
  });
});
