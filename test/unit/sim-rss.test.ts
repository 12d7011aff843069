// The scale simulation's reading of a node's RSS by kind of mapping (bench/lib/sim-rss.ts, `--smaps`).
import { describe, expect, it } from 'vitest';
import { parseSmaps, rssByMapping, rssMb } from '../../bench/lib/sim-rss.js';

const mapping = (range: string, name: string, rssKb: number): string =>
  [`${range} rw-p 00000000 00:00 0${name === '' ? '' : `                          ${name}`}`, `Size:           ${rssKb * 2} kB`, `Rss:            ${rssKb} kB`, `Pss:            ${rssKb} kB`].join('\n');

describe('parseSmaps', () => {
  it("sums Rss by mapping: the brk heap, anonymous memory (unnamed, stacks, named anon), files", () => {
    const text = [
      mapping('00400000-00452000', '/usr/bin/node', 2048),
      mapping('01e6d000-0273c000', '[heap]', 5120),
      mapping('7f0000000000-7f0004000000', '', 3072),
      mapping('7f0004000000-7f0004021000', '[anon:v8]', 1024),
      mapping('7ffc00000000-7ffc00021000', '[stack]', 512),
      mapping('7f1000000000-7f1000100000', '/usr/lib/x86_64-linux-gnu/libc.so.6', 1536),
      mapping('7f2000000000-7f2000100000', '/memfd:doublemapper (deleted)', 256),
    ].join('\n');
    expect(parseSmaps(text)).toEqual({ heap: 5, anon: 4.5, file: 3.75 });
  });

  it('reads a live process whose parts add up to its RSS', () => {
    const parts = rssByMapping(process.pid);
    const total = parts.heap + parts.anon + parts.file;
    expect(parts.anon).toBeGreaterThan(0);
    expect(parts.file).toBeGreaterThan(0);
    // Two reads a moment apart of a running process: equal within a few MB.
    expect(Math.abs(total - rssMb(process.pid))).toBeLessThan(8);
  });

  it('gives NaNs for a process that is gone', () => {
    expect(rssByMapping(2 ** 22 + 1).heap).toBeNaN();
  });
});
