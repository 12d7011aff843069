import { describe, expect, it } from 'vitest';
import { spacesSeries } from '../../bench/lib/sim-gc-spaces.js';
import { windowRise } from '../../bench/lib/sim-rss.js';

// Lines as Node 20's --trace-gc-verbose prints them (two processes interleaved on one stdout).
const block = (pid: number, ms: number, kind: string, newKb: number, allKb: number): string[] => [
  `[${pid}:0x1]    ${ms} ms: ${kind} 38.5 (45.2) -> 37.9 (46.2) MB, 1.2 / 0.0 ms  (average mu = 1.000, current mu = 1.000) allocation failure;`,
  `[${pid}:0x1] Memory allocator,       used:   5096 KB, available: 4238360 KB`,
  `[${pid}:0x1] New space,              used:    508 KB, available:    498 KB, committed:   ${newKb} KB`,
  `[${pid}:0x1] New large object space, used:      0 KB, available:   1006 KB, committed:      0 KB`,
  `[${pid}:0x1] Old space,              used:   2476 KB, available:      7 KB, committed:   2048 KB`,
  `[${pid}:0x1] Code space,             used:    239 KB, available:      0 KB, committed:    512 KB`,
  `[${pid}:0x1] Code large object space,     used:      0 KB, available:      0 KB, committed:      0 KB`,
  `[${pid}:0x1] All spaces,             used:   3529 KB, available: 4239872 KB, committed:   ${allKb} KB`,
  `[${pid}:0x1] Total time spent in GC  : 6.6 ms`,
];

describe('the scale simulation reads V8 spaces from --trace-gc-verbose', () => {
  it('keeps one sample per GC of the given process: its time, kind, and what its spaces committed and the old space used', () => {
    const lines = [
      ...block(10, 60_000, 'Scavenge', 16_384, 65_536),
      ...block(11, 60_500, 'Scavenge', 2048, 8192),
      ...block(10, 120_000, 'Mark-Compact', 32_768, 102_400),
      '[10:0x1] Shrinking page 0x1: end 0x2 -> 0x3',
    ];
    expect(spacesSeries(lines, 10)).toEqual([
      { min: 1, full: false, newMb: 16, oldMb: 2, oldUsedMb: 2476 / 1024, codeMb: 0.5, allMb: 64 },
      { min: 2, full: true, newMb: 32, oldMb: 2, oldUsedMb: 2476 / 1024, codeMb: 0.5, allMb: 100 },
    ]);
    expect(spacesSeries(lines, 11)).toEqual([{ min: 60_500 / 60_000, full: false, newMb: 2, oldMb: 2, oldUsedMb: 2476 / 1024, codeMb: 0.5, allMb: 8 }]);
  });

  it('drops a block cut short (no new-space line before the totals)', () => {
    const cut = block(10, 60_000, 'Scavenge', 16_384, 65_536).filter((line) => !line.includes('New space'));
    expect(spacesSeries([...cut, ...block(10, 61_000, 'Scavenge', 8192, 32_768)], 10)).toEqual([{ min: 61_000 / 60_000, full: false, newMb: 8, oldMb: 2, oldUsedMb: 2476 / 1024, codeMb: 0.5, allMb: 32 }]);
  });
});

describe('the scale simulation reads a rise over a window', () => {
  it('is the median of the last 3 minutes less the median of the first 3, samples outside the window left out', () => {
    // One sample a minute, 0..10; the value is 10 × the minute, and two samples outside the window.
    const samples = [{ min: -1, v: 1000 }, ...Array.from({ length: 11 }, (_, m) => ({ min: m, v: m * 10 })), { min: 11, v: 1000 }];
    // First 3 minutes: 0, 10, 20, 30 (median 10: the lower middle); last 3: 70, 80, 90, 100 (median 80).
    expect(windowRise(samples, 0, 10, (s) => s.v)).toBe(70);
    expect(windowRise([{ min: 5, v: 1 }], 0, 10, (s) => s.v)).toBeNaN();
  });
});
