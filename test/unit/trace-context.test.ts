import { describe, expect, it } from 'vitest';
import { parseTraceparent, requestTraceContext } from '../../src/observability/trace-context.js';

const VALID = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe('parseTraceparent (W3C Trace Context)', () => {
  it('reads a valid header, case-insensitively', () => {
    expect(parseTraceparent(VALID)).toEqual({ traceId: '0af7651916cd43dd8448eb211c80319c', parentId: 'b7ad6b7169203331', flags: '01' });
    expect(parseTraceparent(VALID.toUpperCase())?.traceId).toBe('0af7651916cd43dd8448eb211c80319c');
  });

  it.each([
    ['all-zero trace id', '00-00000000000000000000000000000000-b7ad6b7169203331-01'],
    ['all-zero parent id', '00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01'],
    ['version ff', 'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'],
    ['version 00 with extra fields', `${VALID}-extra`],
    ['short trace id', '00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01'],
    ['not hex', '00-0af7651916cd43dd8448eb211c80319z-b7ad6b7169203331-01'],
  ])('refuses %s', (_what, header) => {
    expect(parseTraceparent(header)).toBeUndefined();
  });

  it('reads a later version by its first four fields', () => {
    expect(parseTraceparent(`01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-future`)?.parentId).toBe('b7ad6b7169203331');
  });
});

describe('requestTraceContext', () => {
  it("keeps the client's trace, parent and sampling decision, and hands baggage on", () => {
    const context = requestTraceContext(VALID.replace(/-01$/, '-00'), 'user=42', 1);
    expect(context).toEqual({
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId: 'b7ad6b7169203331',
      flags: '00',
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00',
      baggage: 'user=42',
    });
  });

  it('starts a new, valid trace otherwise, sampled by the ratio', () => {
    const a = requestTraceContext(undefined, undefined, 1);
    const b = requestTraceContext('garbage', undefined, 0);
    expect(parseTraceparent(a.traceparent)).toEqual({ traceId: a.traceId, parentId: a.spanId, flags: '01' });
    expect(b.flags).toBe('00');
    expect(a.traceId).not.toBe(b.traceId);
    const sampled = Array.from({ length: 2000 }, () => requestTraceContext(undefined, undefined, 0.25)).filter((c) => c.flags === '01').length;
    expect(sampled).toBeGreaterThan(350);
    expect(sampled).toBeLessThan(650);
  });

  it('new traces are well formed and distinct across refills of the random pool, their ids cut from the traceparent', () => {
    const seen = new Set<string>();
    // 24 random bytes per trace from a 4,096-byte pool: 1,000 traces refill it five times.
    for (let i = 0; i < 1000; i++) {
      const context = requestTraceContext(undefined, i % 2 === 0 ? 'k=v' : undefined, i % 2);
      expect(context.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
      expect(context.traceparent).toBe(`00-${context.traceId}-${context.spanId}-${context.flags}`);
      expect(context.flags).toBe(i % 2 === 1 ? '01' : '00');
      expect(context.baggage).toBe(i % 2 === 0 ? 'k=v' : undefined);
      seen.add(context.traceId);
      seen.add(context.spanId);
    }
    expect(seen.size).toBe(2000);
  });
});
