import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * Linux /proc readers shared by the tests, the benchmark suite, the soak and the chaos harness:
 * resident memory, CPU time, system calls, process trees and groups, descriptors. Every reader
 * answers NaN (or nothing) for a process that is gone rather than throwing.
 */

/** Fields of /proc/<pid>/stat after the command name (which may hold spaces and parentheses). */
function statFields(pid: number | string): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** Resident set size of `pid` in MB (VmRSS); NaN once it is gone. */
export function rssMb(pid: number): number {
  try {
    const kb = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? Number.NaN : Number(kb) / 1024;
  } catch {
    return Number.NaN;
  }
}

/** Nanoseconds `pid` has spent on a CPU (schedstat; stat ticks when schedstat is off); NaN once gone. */
export function cpuNs(pid: number): number {
  try {
    const ns = Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
    if (ns > 0) return ns;
  } catch {
    return Number.NaN;
  }
  const fields = statFields(pid) ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 1e7; // utime + stime, 100 ticks per second
}

/** User and system CPU time of `pid` in clock ticks (utime, stime of /proc/<pid>/stat; 100 a second); NaN once gone. */
export function cpuTicks(pid: number): { user: number; system: number } {
  const fields = statFields(pid);
  return fields === undefined ? { user: Number.NaN, system: Number.NaN } : { user: Number(fields[11]), system: Number(fields[12]) };
}

/** read + write system calls `pid` has made so far (/proc/<pid>/io syscr + syscw); NaN once gone. */
export function syscalls(pid: number): number {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    return Number(/syscr: (\d+)/.exec(io)?.[1]) + Number(/syscw: (\d+)/.exec(io)?.[1]);
  } catch {
    return Number.NaN;
  }
}

const pidEntries = (): string[] => readdirSync('/proc').filter((entry) => /^\d+$/.test(entry));

/** Live (not zombie) processes whose parent is `parentPid`, in pid order. */
export function childPids(parentPid: number): number[] {
  const pids: number[] = [];
  for (const entry of pidEntries()) {
    const fields = statFields(entry);
    if (fields !== undefined && Number(fields[1]) === parentPid && fields[0] !== 'Z') pids.push(Number(entry));
  }
  return pids.sort((a, b) => a - b);
}

/** Running (not exited, not a zombie awaiting its parent). */
export function isRunning(pid: number): boolean {
  const fields = statFields(pid);
  return fields !== undefined && fields[0] !== 'Z';
}

/** Every live process of process group `pgid`, with its command line. */
export function processGroup(pgid: number): { pid: number; cmdline: string }[] {
  const members: { pid: number; cmdline: string }[] = [];
  for (const entry of pidEntries()) {
    const fields = statFields(entry);
    if (fields === undefined || Number(fields[2]) !== pgid || fields[0] === 'Z') continue;
    try {
      members.push({ pid: Number(entry), cmdline: readFileSync(`/proc/${entry}/cmdline`, 'utf8') });
    } catch {
      // exited meanwhile
    }
  }
  return members;
}

/** Open file descriptors of `pid`, and how many of them are sockets (links `socket:[inode]`). */
export function descriptors(pid: number): { fds: number; sockets: number } {
  const fds = readdirSync(`/proc/${pid}/fd`);
  let sockets = 0;
  for (const fd of fds) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) sockets++;
    } catch {
      // closed while reading
    }
  }
  return { fds: fds.length, sockets };
}

/** Samples the RSS of `pids` every `everyMs` until stopped; `stop()` gives the peak per pid, in MB. */
export function sampleRss(pids: readonly number[], everyMs = 100): { stop(): Map<number, number> } {
  const peaks = new Map<number, number>(pids.map((pid) => [pid, 0]));
  const sample = (): void => {
    for (const pid of pids) {
      const mb = rssMb(pid);
      if (mb > (peaks.get(pid) ?? 0)) peaks.set(pid, mb);
    }
  };
  const timer = setInterval(sample, everyMs);
  return {
    stop: () => {
      clearInterval(timer);
      sample();
      return peaks;
    },
  };
}
