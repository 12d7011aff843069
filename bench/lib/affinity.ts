import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * CPU affinity of whole processes (every thread), through util-linux's `taskset`. The one-at-a-time
 * group runs each subject with the load generator, the server and the worker on one CPU
 * (docs/performance.md, "One at a time: what the row measures").
 */

/**
 * The CPUs `pid` may run on, as /proc lists them ("0-1"), or those of its thread `tid`; undefined once
 * it is gone.
 */
export function allowedCpus(pid: number, tid?: number | string): string | undefined {
  try {
    const line = readFileSync(tid === undefined ? `/proc/${pid}/status` : `/proc/${pid}/task/${tid}/status`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Cpus_allowed_list:'));
    return line?.slice('Cpus_allowed_list:'.length).trim();
  } catch {
    return undefined;
  }
}

/** Lets every thread of `pid` run only on `cpus` (a list such as "0" or "0-1"); false if it is gone. */
export function setAllowedCpus(pid: number, cpus: string): boolean {
  try {
    execFileSync('taskset', ['--all-tasks', '--pid', '--cpu-list', cpus, String(pid)], { stdio: 'ignore' });
    return true;
  } catch (err) {
    if (allowedCpus(pid) === undefined) return false;
    throw err;
  }
}

/**
 * Puts every thread of each of `pids` on CPU `cpu` and answers a function that gives each one back the
 * CPUs it had. Processes that are gone by then are skipped, both ways. If one cannot be pinned, those
 * pinned before it get their CPUs back before the error is thrown (this process is usually among them).
 * `set` sets one process's CPUs (a test passes its own).
 */
export function pinToCpu(pids: readonly number[], cpu: number, set: (pid: number, cpus: string) => boolean = setAllowedCpus): () => void {
  const before = new Map<number, string>();
  const restore = (): void => {
    for (const [pid, cpus] of before) set(pid, cpus);
  };
  try {
    for (const pid of new Set(pids)) {
      const cpus = allowedCpus(pid);
      if (cpus === undefined) continue;
      set(pid, String(cpu));
      before.set(pid, cpus);
    }
  } catch (err) {
    restore();
    throw err;
  }
  return restore;
}

/** Runs `run` with every thread of `pids` on CPU `cpu`, and gives each its CPUs back afterwards. */
export async function onCpu<T>(pids: readonly number[], cpu: number, run: () => Promise<T>): Promise<T> {
  const restore = pinToCpu(pids, cpu);
  try {
    return await run();
  } finally {
    restore();
  }
}
