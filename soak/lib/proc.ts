import { readdir, readFile, readlink } from 'node:fs/promises';

/** Linux /proc readers for the soak: process tree, open descriptors, resident memory. */

/** Pids whose parent is `parentPid` (scans /proc/<pid>/stat; works without CONFIG_PROC_CHILDREN). */
export async function childPids(parentPid: number): Promise<number[]> {
  const entries = await readdir('/proc');
  const children: number[] = [];
  await Promise.all(
    entries.map(async (entry) => {
      if (!/^\d+$/.test(entry)) return;
      try {
        const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
        // The command name (field 2) is parenthesised and may contain spaces: fields restart after ')'.
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        if (Number(fields[1]) === parentPid) children.push(Number(entry));
      } catch {
        // exited while scanning
      }
    }),
  );
  return children.sort((a, b) => a - b);
}

export interface DescriptorCounts {
  fds: number;
  sockets: number;
}

/** Open file descriptors of `pid`, and how many of them are sockets (links `socket:[inode]`). */
export async function descriptors(pid: number): Promise<DescriptorCounts> {
  const fds = await readdir(`/proc/${pid}/fd`);
  let sockets = 0;
  await Promise.all(
    fds.map(async (fd) => {
      try {
        if ((await readlink(`/proc/${pid}/fd/${fd}`)).startsWith('socket:')) sockets++;
      } catch {
        // closed while reading
      }
    }),
  );
  return { fds: fds.length, sockets };
}

/** Resident set size of `pid` in bytes (VmRSS). */
export async function rssBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (match?.[1] === undefined) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(match[1]) * 1024;
}
