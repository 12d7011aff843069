import { describe, expect, it } from 'vitest';
import { randomUuid } from '../../src/random-ids.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('randomUuid', () => {
  it('gives version 4 UUIDs in lower-case hex, all different, across refills of its pool', () => {
    // 1,000 ids use the pool of 256 ids nearly four times over.
    const ids = Array.from({ length: 1000 }, () => randomUuid());
    for (const id of ids) expect(id).toMatch(UUID_V4);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('fills every hex digit: each position takes many values', () => {
    const ids = Array.from({ length: 2000 }, () => randomUuid());
    for (let position = 0; position < 36; position++) {
      if ([8, 13, 18, 23].includes(position)) continue;
      const seen = new Set(ids.map((id) => id[position]));
      // The version digit is always 4; the variant digit is one of 8, 9, a, b.
      if (position === 14) expect([...seen]).toEqual(['4']);
      else if (position === 19) expect(seen.size).toBe(4);
      else expect(seen.size).toBe(16);
    }
  });
});
