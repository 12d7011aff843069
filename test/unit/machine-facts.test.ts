import { describe, expect, it } from 'vitest';
import { describeIdle, machineLine, stolenTicks } from '../../bench/lib/machine.js';

describe('machine facts of a bench report (bench/lib/machine.ts)', () => {
  it('says when idle CPUs halt without polling', () => {
    // The fifteenth session's machines: the haltpoll driver with polling switched off on the command line.
    expect(describeIdle('haltpoll', 'haltpoll', 'console=ttyS0 guest_halt_poll_ns=0 quiet')).toBe(
      'cpuidle driver haltpoll, governor haltpoll, guest_halt_poll_ns=0 (idle CPUs halt without polling)',
    );
    expect(describeIdle('haltpoll', 'haltpoll', 'haltpoll.guest_halt_poll_ns=0')).toContain('guest_halt_poll_ns=0 (idle CPUs halt');
    // No cpuidle driver: the kernel's default idle, a halt.
    expect(describeIdle('none', 'menu', 'console=ttyS0 quiet')).toBe('cpuidle driver none, governor menu, idle CPUs halt without polling');
  });

  it('does not claim halting where the machine polls or says nothing', () => {
    expect(describeIdle('haltpoll', 'haltpoll', 'guest_halt_poll_ns=200000')).toBe('cpuidle driver haltpoll, governor haltpoll, guest_halt_poll_ns=200000');
    expect(describeIdle('none', undefined, 'idle=poll')).toBe('cpuidle driver none, idle=poll');
    expect(describeIdle('intel_idle', 'menu', '')).toBe('cpuidle driver intel_idle, governor menu');
    expect(describeIdle(undefined, undefined, 'guest_halt_poll_ns=0')).toBe('cpuidle: not exposed');
  });

  it('reads the stolen jiffies from the cpu line of /proc/stat', () => {
    const stat = 'cpu  366073 0 47755 234815 301 0 18916 206 0 0\ncpu0 183000 0 23000 117000 150 0 9000 103 0 0\n';
    expect(stolenTicks(stat)).toBe(206);
    expect(stolenTicks('intr 1 2 3\n')).toBeUndefined();
  });

  it('prints the kernel, the idle line and the time stolen between two readings', () => {
    const line = machineLine(200, 450);
    expect(line).toMatch(/^kernel \S+ · /);
    expect(line).toContain('CPU time stolen by the host during the run 2.5 s');
    expect(machineLine(undefined, 450)).toContain('stolen CPU time not reported');
  });
});
