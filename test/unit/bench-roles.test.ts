import { describe, expect, it } from 'vitest';
import type { Sample } from '../../bench/lib/members.js';
import { rolesText, verdict } from '../../bench/lib/report.js';

const sample = (rps: number, roles: Record<string, number> | undefined): Sample => ({
  requests: rps * 3,
  errors: 0,
  rps,
  p50Ms: 5,
  p99Ms: 20,
  p90Ms: 10,
  maxMs: 30,
  marked: 0,
  elapsedMs: 3000,
  cpu: { serverUs: 100, workerUs: 20, generatorPct: 40, serverSyscalls: 2, ...(roles === undefined ? {} : { roles }) },
});

describe('the bench note pricing each process of a setup', () => {
  it('gives each role its median over the rounds, in order, and the median total', () => {
    const text = rolesText([sample(1, { nginx: 30, 'node A': 50, generator: 40 }), sample(1, { nginx: 34, 'node A': 60, generator: 30 }), sample(1, { nginx: 32, 'node A': 55, generator: 35 })]);
    expect(text).toBe('nginx 32 + node A 55 + generator 35 = 122');
  });

  it('is a note of the rows that ask for it, scenario against baseline, and leaves the verdict alone', () => {
    const samples = {
      cross: [sample(8000, { nginx: 33, 'node B': 59, 'node A': 26 })],
      local: [sample(10_000, { nginx: 31, 'node B': 0, 'node A': 56 })],
    };
    const row = { name: 'crossing', scenario: 'cross', baseline: 'local', target: 0.85 };
    const plain = verdict(row, samples, 'local');
    const noted = verdict({ ...row, rolesNote: true }, samples, 'local');
    expect(plain.cells.at(-1)).toBe('');
    expect(noted.cells.at(-1)).toBe('CPU µs/req by process (all of them, the load generator included): nginx 33 + node B 59 + node A 26 = 118, against nginx 31 + node B 0 + node A 56 = 87');
    expect(noted.verdict).toEqual(plain.verdict);
    expect(noted.verdict.pass).toBe(false);
  });
});
