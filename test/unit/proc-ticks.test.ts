import { describe, expect, it } from 'vitest';
import { cpuTicks } from '../support/proc.js';

describe('cpuTicks (test/support/proc.ts)', () => {
  it('counts the CPU time a process spends, split into user and system ticks', () => {
    const before = cpuTicks(process.pid);
    // Spin until this process has spent 120 ms of CPU (not of wall time: a shared machine may hold it back).
    const start = process.cpuUsage();
    let spin = 0;
    for (;;) {
      const used = process.cpuUsage(start);
      if (used.user + used.system >= 120_000) break;
      spin++;
    }
    const after = cpuTicks(process.pid);
    expect(spin).toBeGreaterThan(0);
    expect(Number.isInteger(before.user) && Number.isInteger(before.system)).toBe(true);
    // 120 ms is 12 ticks; the kernel's tick accounting may round a little either way.
    expect(after.user + after.system - (before.user + before.system)).toBeGreaterThanOrEqual(9);
    expect(after.user).toBeGreaterThanOrEqual(before.user);
  });

  it('answers NaN for a process that does not exist', () => {
    const gone = cpuTicks(2 ** 23); // above Linux's largest pid_max (2^22)
    expect(gone.user).toBeNaN();
    expect(gone.system).toBeNaN();
  });
});
