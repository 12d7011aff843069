import { describe, expect, it } from 'vitest';
import { classify } from '../../soak/lib/load.js';
import type { ProcessSample } from '../../soak/lib/verdict.js';
import { judge, median } from '../../soak/lib/verdict.js';

const MB = 1024 * 1024;

/** One process's samples every 10 s from t=0 to t=(n-1)*10 s; `at(i)` overrides fields of sample i. */
function series(process: string, n: number, at: (i: number) => Partial<ProcessSample> = () => ({})): ProcessSample[] {
  return Array.from({ length: n }, (_, i) => ({
    tMs: i * 10_000,
    process,
    pid: 100,
    heapUsedBytes: 20 * MB,
    externalBytes: 2 * MB,
    rssBytes: 80 * MB,
    fds: 40,
    sockets: 20,
    workers: 0,
    ...at(i),
  }));
}

describe('soak verdict', () => {
  it('is flat for steady processes and reports the first- and last-third medians', () => {
    const v = judge([...series('primary', 30), ...series('child0', 30, (i) => ({ heapUsedBytes: (20 + (i % 3) * 0.5) * MB }))], 0);
    expect(v.reasons).toEqual([]);
    expect(v.flat).toBe(true);
    const child = v.processes.find((p) => p.process === 'child0');
    expect(child?.samples).toBe(30);
    expect(child?.heap.first).toBe(20.5 * MB);
    expect(child?.heap.last).toBe(20.5 * MB);
    expect(child?.fds).toEqual({ first: 40, last: 40, growth: 0 });
  });

  it('flags heap growth over both 5 MB and 10 %, names the process and the numbers', () => {
    // 100 MB → 110 MB: 10 MB and exactly 10 %, so neither tolerance holds.
    const v = judge(series('child1', 30, (i) => ({ heapUsedBytes: (100 + (i >= 20 ? 10 : 0)) * MB })), 0);
    expect(v.flat).toBe(false);
    expect(v.reasons).toEqual(['child1: heap after GC grew 10.0 MB (100.0 MB → 110.0 MB, +10.0 %), over both 5.0 MB and 10 %']);
  });

  it('accepts growth under 5 MB even above 10 %, and under 10 % even above 5 MB', () => {
    expect(judge(series('a', 30, (i) => ({ heapUsedBytes: (10 + (i >= 20 ? 4 : 0)) * MB })), 0).flat).toBe(true);
    expect(judge(series('a', 30, (i) => ({ heapUsedBytes: (100 + (i >= 20 ? 9 : 0)) * MB })), 0).flat).toBe(true);
  });

  it('ignores the warm-up: growth before it does not count', () => {
    const samples = series('child0', 30, (i) => ({ heapUsedBytes: (i < 10 ? 10 + i * 2 : 40) * MB }));
    expect(judge(samples, 0).flat).toBe(false);
    expect(judge(samples, 100_000).flat).toBe(true);
  });

  it('subtracts connected workers from fds and sockets, and flags what is left beyond ±10', () => {
    // 12 more workers at the end: 12 more fds and sockets, nothing leaked.
    const churned = series('child0', 30, (i) => (i >= 20 ? { fds: 52, sockets: 32, workers: 12 } : {}));
    expect(judge(churned, 0).flat).toBe(true);
    // Same workers, 11 more descriptors: a leak.
    const leaking = series('child0', 30, (i) => (i >= 20 ? { fds: 51, sockets: 31 } : {}));
    const v = judge(leaking, 0);
    expect(v.flat).toBe(false);
    expect(v.reasons).toEqual([
      'child0: open fds (minus workers) moved 11 (40 → 51), beyond ±10',
      'child0: open sockets (minus workers) moved 11 (20 → 31), beyond ±10',
    ]);
    // Exactly 10 is within the slack.
    expect(judge(series('child0', 30, (i) => (i >= 20 ? { fds: 50, sockets: 30 } : {})), 0).flat).toBe(true);
  });

  it('is not flat when a process was restarted or has fewer than 3 samples after the warm-up', () => {
    const restarted = judge(series('child0', 30, (i) => ({ pid: i < 15 ? 100 : 200 })), 0);
    expect(restarted.reasons).toEqual(['child0: pid changed (100 → 200): the process was restarted']);
    const short = judge(series('primary', 12), 100_000);
    expect(short.flat).toBe(false);
    expect(short.reasons).toEqual(['primary: 2 samples after warm-up, need at least 3']);
    expect(judge([], 0).reasons).toEqual(['no samples']);
  });

  it('median of even and odd counts', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
  });
});

describe('soak answer classification', () => {
  const body = Buffer.from('{"a":1}');
  const err = (code: string): string => JSON.stringify({ error: { code, message: 'x' }, request_id: 'r' });

  it('accepts exactly what each main route should answer', () => {
    expect(classify({ label: 'hello', method: 'GET', path: '/soak/hello' }, 200, '{"ok":true}')).toEqual({ kind: 'hello 200', outcome: 'ok' });
    expect(classify({ label: 'hello', method: 'GET', path: '/soak/hello' }, 200, '{"ok":false}').outcome).toBe('unexpected');
    expect(classify({ label: 'echo', method: 'POST', path: '/soak/echo', body }, 200, '{"a":1}').outcome).toBe('ok');
    expect(classify({ label: 'echo', method: 'POST', path: '/soak/echo', body }, 200, '{"a":2}').outcome).toBe('unexpected');
    expect(classify({ label: 'missing', method: 'GET', path: '/soak/nope/1' }, 404, err('NOT_FOUND'))).toEqual({ kind: 'missing 404 NOT_FOUND', outcome: 'ok' });
    expect(classify({ label: 'throw', method: 'GET', path: '/soak/throw' }, 500, err('invocation_failed'))).toEqual({ kind: 'throw 500 invocation_failed', outcome: 'ok' });
    expect(classify({ label: 'throw', method: 'GET', path: '/soak/throw' }, 500, err('INTERNAL_ERROR')).outcome).toBe('unexpected');
  });

  it('counts what a leaving worker can cause as a race on churn routes only', () => {
    const churn = { label: 'churn', method: 'GET', path: '/soak/churn/w1/f0' } as const;
    expect(classify(churn, 502, err('WORKER_DISCONNECTED'))).toEqual({ kind: 'churn 502 WORKER_DISCONNECTED', outcome: 'race' });
    expect(classify(churn, 500, err('MIDDLEWARE_FAILED')).outcome).toBe('race');
    expect(classify(churn, 503, err('FUNCTION_UNAVAILABLE')).outcome).toBe('race');
    expect(classify(churn, 504, err('TIMEOUT')).outcome).toBe('unexpected');
    const departed = { label: 'departed', method: 'GET', path: '/soak/churn/w1/f3' } as const;
    expect(classify(departed, 404, err('NOT_FOUND')).outcome).toBe('ok');
    expect(classify(departed, 503, err('FUNCTION_UNAVAILABLE')).outcome).toBe('ok');
    expect(classify(departed, 500, err('MIDDLEWARE_FAILED')).outcome).toBe('ok');
    expect(classify(departed, 502, err('WORKER_DISCONNECTED')).outcome).toBe('unexpected');
    expect(classify(departed, 500, err('invocation_failed')).outcome).toBe('unexpected');
  });
});
