import type { LoadResult } from './load.js';
import { runLoad, runLoadOn } from './load.js';
import { CONNECTIONS } from './options.js';
import type { RequestSpec } from './requests.js';
import { FORWARDED_MARK, loadOptions } from './requests.js';
import type { Baseline, Engine, Resource } from './subjects.js';
import { openPinned } from './subjects.js';
import { onCpu } from './affinity.js';
import { cpuNs, processGroup, sampleRss, syscalls } from '../../test/support/proc.js';

/**
 * Members: one measured subject of a load group, and how it is measured (closed-loop load, CPU per
 * request of its server and worker processes from /proc, the largest RSS of its server processes).
 */

/** A process group's live processes split into workers (bench/workers/) and the rest (the server side). */
function groupPids(pgid: number): { server: number[]; workers: number[] } {
  const server: number[] = [];
  const workers: number[] = [];
  for (const { pid, cmdline } of processGroup(pgid)) (cmdline.includes('/bench/workers/') ? workers : server).push(pid);
  return { server, workers };
}

/** The peak RSS of any of `pids` over a run, in MB. */
function peakRss(pids: number[]): { stop(): number } {
  const sampler = sampleRss(pids, 250);
  return { stop: () => Math.max(0, ...sampler.stop().values()) };
}

export interface CpuCost {
  /** CPU per request of the server side (engine or baseline processes), microseconds. */
  serverUs: number;
  /** CPU per request of the worker processes, microseconds. */
  workerUs: number;
  /** The load generator's CPU over the window, in % of one core. */
  generatorPct: number;
  /** read + write system calls per request of the server side. */
  serverSyscalls: number;
  /** CPU per request of each named part of the setup (µs), where the member names them: see `Roles`. */
  roles?: Record<string, number>;
}

/** Named subsets of a member's processes (nginx, the node that serves HTTP, …), each priced on its own. */
export type Roles = Record<string, number[]>;

/** Measures CPU of the given processes and of this one over the load's measured window. */
export function cpuMeter(pids: { server: number[]; workers: number[]; roles?: Roles }): { hooks: { start(): void; end(): void }; cost(result: LoadResult): CpuCost } {
  const sum = (list: number[], at: Map<number, number>): number => list.reduce((total, pid) => total + (at.get(pid) ?? 0), 0);
  const rolePids = Object.values(pids.roles ?? {}).flat();
  const snapshot = (): Map<number, number> => new Map([...pids.server, ...pids.workers, ...rolePids].map((pid) => [pid, cpuNs(pid)]));
  const ioSnapshot = (): Map<number, number> => new Map(pids.server.map((pid) => [pid, syscalls(pid)]));
  let before = new Map<number, number>();
  let after = new Map<number, number>();
  let ioBefore = new Map<number, number>();
  let ioAfter = new Map<number, number>();
  let generator = process.cpuUsage();
  return {
    hooks: {
      start: () => {
        before = snapshot();
        ioBefore = ioSnapshot();
        generator = process.cpuUsage();
      },
      end: () => {
        after = snapshot();
        ioAfter = ioSnapshot();
        generator = process.cpuUsage(generator);
      },
    },
    cost: (result) => {
      const requests = Math.max(result.requests, 1);
      return {
        serverUs: (sum(pids.server, after) - sum(pids.server, before)) / 1000 / requests,
        workerUs: (sum(pids.workers, after) - sum(pids.workers, before)) / 1000 / requests,
        generatorPct: ((generator.user + generator.system) / 1000 / result.elapsedMs) * 100,
        serverSyscalls: (sum(pids.server, ioAfter) - sum(pids.server, ioBefore)) / requests,
        // The load generator is a role of every member that names roles: it shares the CPUs too.
        ...(pids.roles === undefined
          ? {}
          : {
              roles: {
                ...Object.fromEntries(Object.entries(pids.roles).map(([role, list]) => [role, (sum(list, after) - sum(list, before)) / 1000 / requests])),
                generator: (generator.user + generator.system) / requests,
              },
            }),
      };
    },
  };
}

export interface Sample extends LoadResult {
  /** Largest VmRSS of a server process during the run: an engine child, or a baseline process. */
  rssMb?: number;
  cpu: CpuCost;
}

/** One measured thing: a process setup (shared, started once per group) and a way to load it. */
export interface Member {
  label: string;
  /** A Switchyard engine (its RSS counts against the engine's target). */
  engine: boolean;
  prepare(): Promise<unknown>;
  run(): Promise<Sample>;
}

/** One measured run: CPU of `pids` and the peak RSS of `rssPids` around `load`. */
async function measured(pids: { server: number[]; workers: number[]; roles?: Roles }, rssPids: number[], load: (hooks: { start(): void; end(): void }) => Promise<LoadResult>): Promise<Sample> {
  const meter = cpuMeter(pids);
  const rss = peakRss(rssPids);
  const result = await load(meter.hooks);
  return { ...result, rssMb: rss.stop(), cpu: meter.cost(result) };
}

/** Load on `origin(setup)`, CPU of the processes `pids(setup)` names (several process groups, say). */
export function customMember<T>(
  label: string,
  res: Resource<T>,
  spec: RequestSpec,
  origin: (setup: T) => string,
  pids: (setup: T) => { server: number[]; workers: number[]; rss: number[]; roles?: Roles },
): Member {
  return {
    label,
    engine: true,
    prepare: () => res.get(),
    run: async () => {
      const setup = await res.get();
      const { server, workers, rss, roles } = pids(setup);
      return measured({ server, workers, ...(roles === undefined ? {} : { roles }) }, rss, (hooks) => runLoad(loadOptions(origin(setup), spec, { onMeasure: hooks })));
    },
  };
}

/** Every live process of a process group, server side and bench workers apart. */
export const processGroupPids = (pgid: number): { server: number[]; workers: number[] } => groupPids(pgid);

export function baselineMember(label: string, res: Resource<Baseline>, spec: RequestSpec): Member {
  const member = customMember(label, res, spec, (baseline) => baseline.origin, (baseline) => {
    const pids = groupPids(baseline.pid);
    return { ...pids, rss: pids.server };
  });
  return { ...member, engine: false };
}

/** The engine's processes (primary and children: its process group) and the workers started for it. */
export const enginePids = (setup: Engine): { server: number[]; workers: number[] } => ({
  server: groupPids(setup.engine.child.pid as number).server,
  workers: setup.workers.map((w) => w.child.pid as number),
});

/** Pool load on an engine (connections dealt by node:cluster), RSS of its children sampled meanwhile. */
export function engineMember(label: string, res: Resource<Engine>, spec: RequestSpec, markForwarded = false): Member {
  return {
    label,
    engine: true,
    prepare: () => res.get(),
    run: async () => {
      const setup = await res.get();
      const mark = markForwarded ? { mark: FORWARDED_MARK } : {};
      return measured(enginePids(setup), setup.children.map((c) => c.pid), (hooks) => runLoad(loadOptions(setup.engine.httpUrl, spec, { onMeasure: hooks, ...mark })));
    },
  };
}

/** Every connection pinned to the process without the worker: 100 % of requests forwarded. */
export function forcedForwardMember(label: string, res: Resource<Engine>, spec: RequestSpec): Member {
  return {
    label,
    engine: true,
    prepare: () => res.get(),
    run: async () => {
      const setup = await res.get();
      // Pinned just before the run: the engine closes idle keep-alive connections after 5 s.
      const clients = await openPinned(setup.engine.httpUrl, CONNECTIONS, spec.path, (s) => s.status === 200 && s.forwarded);
      try {
        return await measured(enginePids(setup), setup.children.map((c) => c.pid), (hooks) =>
          runLoadOn(clients, loadOptions(setup.engine.httpUrl, spec, { mark: FORWARDED_MARK, onMeasure: hooks })),
        );
      } finally {
        await Promise.all(clients.map((c) => c.close()));
      }
    },
  };
}

/**
 * `member` run with this process (the load generator), and every process `pids` names for its setup,
 * on CPU `cpu` alone; each gets its CPUs back after the run.
 */
export function onOneCpu<T>(member: Member, res: Resource<T>, pids: (setup: T) => number[], cpu = 0): Member {
  return {
    ...member,
    label: `${member.label}, one CPU`,
    run: async () => onCpu([process.pid, ...pids(await res.get())], cpu, () => member.run()),
  };
}

/** Every process of a baseline (its process group: server, cluster children, worker). */
export const baselinePids = (baseline: Baseline): number[] => {
  const { server, workers } = groupPids(baseline.pid);
  return [...server, ...workers];
};

/** Every process of an engine setup: its process group and the workers started for it. */
export const engineSetupPids = (setup: Engine): number[] => {
  const { server, workers } = enginePids(setup);
  return [...server, ...workers];
};
