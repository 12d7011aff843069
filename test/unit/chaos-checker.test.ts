import { describe, expect, it } from 'vitest';
import type { CheckInput, ConvergenceRecord, ReplicaEvent, RequestRecord } from '../../chaos/checker.js';
import { allDownWindows, check, formatPercent, summaryLine } from '../../chaos/checker.js';

let next = 0;
function ok(start: number, overrides: Partial<RequestRecord> = {}): RequestRecord {
  const token = `t${next++}`;
  return { type: 'request', token, conn: 0, node: 'a', start, end: start + 2, status: 200, tokenOk: true, crossed: false, hung: false, replica: 'a0', ...overrides };
}

const replicas = ['a0', 'a1'];
const converged: ConvergenceRecord[] = [
  { type: 'convergence', fault: 'initial', kind: 'startup', ms: 9000 },
  { type: 'convergence', fault: 0, kind: 'kill-worker', ms: 1200 },
  { type: 'convergence', fault: 1, kind: 'kill-child', ms: 2400 },
];

function input(requests: RequestRecord[], overrides: Partial<CheckInput> = {}): CheckInput {
  return { requests, replicaEvents: [], replicas, convergence: converged, convergenceBoundMs: 5000, minSuccessRatio: 0.99, ...overrides };
}

const healthy = (count: number): RequestRecord[] => Array.from({ length: count }, (_, i) => ok(i * 10));

describe('chaos checker', () => {
  it('passes a clean run and prints the summary line', () => {
    const report = check(input(healthy(1000)));
    expect(report).toMatchObject({ total: 1000, ok: 1000, failed: 0, hung: 0, crossed: 0, successRatio: 1, convergedWorstMs: 2400, problems: [], passed: true });
    // The start-up convergence is not a fault: it does not count as the worst.
    expect(summaryLine(report)).toBe('chaos: 1000 requests, 1000 ok, 0 failed, 0 hung, 0 crossed, success 100.00%, converged worst 2400 ms');
  });

  it('flags a response carrying another request\'s token even when everything else succeeded', () => {
    const requests = [...healthy(999), ok(20_000, { tokenOk: false, crossed: true })];
    const report = check(input(requests));
    expect(report.crossed).toBe(1);
    expect(report.failuresByKind).toEqual({ crossed: 1 });
    expect(report.passed).toBe(false);
    expect(report.problems).toEqual(["1 response(s) carried another request's token"]);
    expect(summaryLine(report)).toContain('1 crossed');
  });

  it('flags a hung request', () => {
    const requests = [...healthy(999), ok(20_000, { status: undefined, err: 'CUTOFF', tokenOk: false, hung: true, end: 35_000 })];
    const report = check(input(requests));
    expect(report.hung).toBe(1);
    expect(report.failuresByKind).toEqual({ hung: 1 });
    expect(report.problems).toEqual(['1 request(s) hung']);
    expect(report.passed).toBe(false);
  });

  it('flags a success ratio below the minimum and counts failures by kind', () => {
    const failures = [
      ...Array.from({ length: 8 }, (_, i) => ok(20_000 + i, { status: 502, code: 'WORKER_DISCONNECTED', tokenOk: false })),
      ...Array.from({ length: 3 }, (_, i) => ok(21_000 + i, { status: undefined, err: 'UND_ERR_SOCKET', tokenOk: false })),
      ok(22_000, { tokenOk: false }),
    ];
    const report = check(input([...healthy(988), ...failures]));
    expect(report.failuresByKind).toEqual({ '502 WORKER_DISCONNECTED': 8, 'socket UND_ERR_SOCKET': 3, 'bad body': 1 });
    expect(report.successRatio).toBeCloseTo(0.988, 6);
    expect(report.problems).toEqual(['success ratio 98.80% below 99.00%']);
    expect(report.passed).toBe(false);
    // The same failures over more traffic pass.
    expect(check(input([...healthy(1300), ...failures])).passed).toBe(true);
  });

  it('leaves requests issued while every replica was down out of the ratio, but still counts them', () => {
    const events: ReplicaEvent[] = [
      { type: 'replica', at: 5000, replica: 'a0', up: false },
      { type: 'replica', at: 5100, replica: 'a1', up: false },
      { type: 'replica', at: 6000, replica: 'a0', up: true },
      { type: 'replica', at: 6500, replica: 'a1', up: true },
    ];
    expect(allDownWindows(replicas, events, 10_000)).toEqual([{ from: 5100, to: 6000 }]);
    const outage = Array.from({ length: 50 }, (_, i) => ok(5100 + i * 10, { status: 503, code: 'FUNCTION_UNAVAILABLE', tokenOk: false }));
    const report = check(input([...healthy(500), ...outage], { replicaEvents: events }));
    expect(report.failed).toBe(50);
    expect(report.eligible).toBe(500);
    expect(report.successRatio).toBe(1);
    expect(report.passed).toBe(true);
  });

  it('flags a fault that converged over the bound or not at all', () => {
    const slow: ConvergenceRecord[] = [
      ...converged,
      { type: 'convergence', fault: 2, kind: 'restart-redis', ms: 7300 },
      { type: 'convergence', fault: 3, kind: 'kill-child', ms: null, lastProblem: 'node b: replica a1 listed 2 times' },
    ];
    const report = check(input(healthy(100), { convergence: slow }));
    expect(report.convergedWorstMs).toBe(7300);
    expect(report.problems).toEqual([
      'fault 2 (restart-redis) converged in 7300 ms, over the 5000 ms bound',
      'fault 3 (kill-child) did not converge: node b: replica a1 listed 2 times',
    ]);
  });

  it('fails a run without requests and never rounds a ratio up to the threshold', () => {
    expect(check(input([])).problems).toContain('no requests were made');
    expect(formatPercent(0.98996)).toBe('98.99%');
    expect(formatPercent(0.99)).toBe('99.00%');
  });
});
