import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { cpus } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { allowedCpus, pinToCpu, setAllowedCpus } from '../../bench/lib/affinity.js';

/** The CPUs each thread of `pid` may run on. */
const threadCpus = (pid: number): (string | undefined)[] => readdirSync(`/proc/${pid}/task`).map((tid) => allowedCpus(pid, tid));

describe('pinToCpu (bench/lib/affinity.ts)', () => {
  const children: ReturnType<typeof spawn>[] = [];
  afterEach(() => {
    for (const c of children.splice(0)) c.kill('SIGKILL');
  });

  /** An idle Node process (several threads besides the main one: V8's platform workers, libuv's), once it runs; its pid. */
  const idleNode = async (): Promise<number> => {
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000); console.log("up")'], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    await new Promise((resolve) => child.stdout?.once('data', resolve));
    return child.pid as number;
  };

  it('puts every thread of a process on one CPU and gives each its CPUs back', async () => {
    const pid = await idleNode();
    const original = allowedCpus(pid) as string;
    expect(original).toMatch(/^\d/);
    expect(threadCpus(pid).length).toBeGreaterThan(1);
    const last = cpus().length - 1;

    const restore = pinToCpu([pid, pid], last);
    expect(new Set(threadCpus(pid))).toEqual(new Set([String(last)]));
    restore();
    expect(new Set(threadCpus(pid))).toEqual(new Set([original]));
  });

  it('gives the processes pinned so far their CPUs back when one cannot be pinned', async () => {
    const pid = await idleNode();
    const original = allowedCpus(pid) as string;
    const last = String(cpus().length - 1);
    const calls: string[] = [];
    // The second process (this one) refuses to be pinned; the first is really pinned, then given back.
    const set = (target: number, list: string): boolean => {
      calls.push(`${target === pid ? 'child' : 'self'} ${list}`);
      if (target === process.pid) throw new Error('refused');
      return setAllowedCpus(target, list);
    };
    expect(() => pinToCpu([pid, process.pid], Number(last), set)).toThrow('refused');
    expect(calls).toEqual([`child ${last}`, `self ${last}`, `child ${original}`]);
    expect(new Set(threadCpus(pid))).toEqual(new Set([original]));
  });

  it('skips a process that is gone', () => {
    const restore = pinToCpu([2 ** 23], 0); // above Linux's largest pid_max (2^22)
    expect(allowedCpus(2 ** 23)).toBeUndefined();
    expect(() => restore()).not.toThrow();
  });
});
