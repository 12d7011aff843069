import { readFileSync } from 'node:fs';
import { release } from 'node:os';

/**
 * What a run's figures depend on beyond the CPU model, printed under each report's heading: the
 * kernel, how its idle CPUs wait (docs/performance.md, "One at a time: what the row measures": on
 * virtual machines whose idle CPUs halt without polling, waking a process on the other CPU costs
 * about 30 µs, which moves the lone-request rows from one machine to the next) and the CPU time the
 * hypervisor reports as stolen during the run.
 */

/** A file's first line, or undefined where the kernel does not have it. */
function firstLine(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').split('\n')[0]?.trim();
  } catch {
    return undefined;
  }
}

/** How idle CPUs wait, in words, from the cpuidle driver and governor and the kernel's command line. */
export function describeIdle(driver: string | undefined, governor: string | undefined, cmdline: string | undefined): string {
  if (driver === undefined) return 'cpuidle: not exposed';
  const poll = /(?:^|\s)(?:haltpoll\.)?guest_halt_poll_ns=(\d+)/.exec(cmdline ?? '')?.[1];
  const idleParam = /(?:^|\s)idle=(\S+)/.exec(cmdline ?? '')?.[1];
  const parts = [`cpuidle driver ${driver}${governor === undefined ? '' : `, governor ${governor}`}`];
  if (poll !== undefined) parts.push(`guest_halt_poll_ns=${poll}${poll === '0' ? ' (idle CPUs halt without polling)' : ''}`);
  else if (driver === 'none' && idleParam === undefined) parts.push('idle CPUs halt without polling');
  if (idleParam !== undefined) parts.push(`idle=${idleParam}`);
  return parts.join(', ');
}

/** Jiffies of CPU time stolen by the hypervisor, summed over all CPUs (the `cpu` line of /proc/stat). */
export function stolenTicks(stat: string): number | undefined {
  const line = stat.split('\n').find((l) => l.startsWith('cpu '));
  const steal = line?.trim().split(/\s+/)[8];
  return steal === undefined ? undefined : Number(steal);
}

/** The stolen time so far (jiffies), or undefined without /proc/stat; two readings bound a run. */
export function readStolen(): number | undefined {
  try {
    return stolenTicks(readFileSync('/proc/stat', 'utf8'));
  } catch {
    return undefined;
  }
}

/** The kernel and how its idle CPUs wait, as read now. */
export function kernelAndIdle(): string {
  const idle = describeIdle(
    firstLine('/sys/devices/system/cpu/cpuidle/current_driver'),
    firstLine('/sys/devices/system/cpu/cpuidle/current_governor'),
    firstLine('/proc/cmdline'),
  );
  return `kernel ${release()} · ${idle}`;
}

/** A report's machine line: kernelAndIdle() and the time stolen between two readings (Linux reports 100 jiffies a second). */
export function machineLine(stolenAtStart: number | undefined, stolenAtEnd: number | undefined): string {
  const stolen = stolenAtStart === undefined || stolenAtEnd === undefined ? 'stolen CPU time not reported' : `CPU time stolen by the host during the run ${((stolenAtEnd - stolenAtStart) / 100).toFixed(1)} s`;
  return `${kernelAndIdle()} · ${stolen}`;
}
