import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client, request } from 'undici';
import type { EngineHandle, ManagedProcess } from '../../test/support/processes.js';
import { ROOT, spawnManaged, startEngine, stopProcess } from '../../test/support/processes.js';
import { BASELINES_DIR, ROUTES, SERVED_BY, WORKERS_DIR } from './options.js';
import { HELLO } from './requests.js';

/**
 * The subjects a scenario measures: a baseline (bench/baselines/, its own process group) or a
 * Switchyard engine with its workers, started once per group (Resource) and stopped after it.
 */
/** Stops a detached process group (a baseline and everything it started). */
export async function stopGroup(p: ManagedProcess): Promise<void> {
  const pid = p.child.pid;
  if (pid === undefined) return;
  const signalGroup = (signal: NodeJS.Signals): void => {
    try {
      process.kill(-pid, signal);
    } catch {
      // the group is gone
    }
  };
  if (p.child.exitCode === null && p.child.signalCode === null) {
    signalGroup('SIGTERM');
    const force = setTimeout(() => signalGroup('SIGKILL'), 5000);
    await p.exited;
    clearTimeout(force);
  }
  // Whatever the leader left behind (a worker still closing its socket).
  await new Promise((r) => setTimeout(r, 100));
  signalGroup('SIGKILL');
}

export interface Baseline {
  origin: string;
  /** Leader of the baseline's process group (its workers and cluster children are in the group). */
  pid: number;
  stop(): Promise<void>;
}

/** `nodeArgs`: flags for the baseline's own process (not its worker's), e.g. the window profiler's preload. */
export async function startBaseline(file: string, env: NodeJS.ProcessEnv = {}, nodeArgs: string[] = []): Promise<Baseline> {
  const p = spawnManaged(process.execPath, [...nodeArgs, join(BASELINES_DIR, file)], { ...process.env, ...env }, ROOT, true);
  const exited = p.exited.then((r) => {
    throw new Error(`baseline ${file} exited before it was ready (${JSON.stringify(r)}): ${p.stderr.lines.slice(-10).join('\n')}`);
  });
  const line = await Promise.race([p.stdout.waitFor((l) => l.startsWith('port='), 30_000, `${file} port`), exited]);
  exited.catch(() => undefined);
  return { origin: `http://127.0.0.1:${line.slice('port='.length)}`, pid: p.child.pid as number, stop: () => stopGroup(p) };
}

export interface ChildInfo {
  pid: number;
  peerId: string;
  workers: number;
}

export async function readyz(engine: EngineHandle): Promise<{ connectedWorkers: number; children: ChildInfo[] }> {
  const res = await request(`${engine.adminUrl}/readyz`, { headersTimeout: 5000, bodyTimeout: 5000 });
  return (await res.body.json()) as { connectedWorkers: number; children: ChildInfo[] };
}

export async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>, everyMs = 25): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export interface Served {
  status: number;
  peer: string;
  forwarded: boolean;
}

export async function probe(client: Client, path: string): Promise<Served> {
  const res = await client.request({ path, method: 'GET', headersTimeout: 10_000, bodyTimeout: 10_000 });
  await res.body.dump();
  const [peer = '', flag = ''] = String(res.headers[SERVED_BY] ?? '').split('; ');
  return { status: res.statusCode, peer, forwarded: flag === 'forwarded=true' };
}

/**
 * `count` single-connection clients whose connection landed on an engine process `accept` likes
 * (judged from one probe's x-switchyard-served-by). node:cluster deals connections round-robin, so
 * about one in `processes` is kept; the others are closed.
 */
export async function openPinned(origin: string, count: number, path: string, accept: (served: Served) => boolean): Promise<Client[]> {
  const kept: Client[] = [];
  let opened = 0;
  while (kept.length < count) {
    if (opened > count * 20 + 20) throw new Error(`could not pin ${count} connections (kept ${kept.length} of ${opened})`);
    const batch = Array.from({ length: Math.min(64, (count - kept.length) * 2) }, () => new Client(origin, { pipelining: 1, keepAliveTimeout: 60_000 }));
    opened += batch.length;
    const probed = await Promise.all(batch.map(async (client) => ({ client, ok: accept(await probe(client, path)) })));
    for (const { client, ok } of probed) {
      if (ok && kept.length < count) kept.push(client);
      else await client.close();
    }
  }
  return kept;
}

/** One client per engine process (a 404 also says who served it). */
export async function clientPerPeer(engine: EngineHandle, peers: string[]): Promise<Map<string, Client>> {
  const byPeer = new Map<string, Client>();
  for (const peer of peers) {
    const [client] = await openPinned(engine.httpUrl, 1, '/__bench/pin', (s) => s.peer === peer);
    byPeer.set(peer, client as Client);
  }
  return byPeer;
}

export interface Engine {
  engine: EngineHandle;
  children: ChildInfo[];
  workers: ManagedProcess[];
  stop(): Promise<void>;
}

export interface WorkerSpec {
  script: 'raw-worker.mjs' | 'sdk-worker.mjs';
  env?: NodeJS.ProcessEnv;
}

export function spawnWorker(engine: EngineHandle, spec: WorkerSpec): ManagedProcess {
  return spawnManaged(process.execPath, [join(WORKERS_DIR, spec.script)], {
    ...process.env,
    OTEL_ENABLED: 'false',
    III_URL: engine.workerUrl,
    ROUTES,
    ...spec.env,
  });
}

/**
 * An engine of `processes` children with the given workers, started one after the other (node:cluster
 * deals their sockets round-robin, so with `onePerChild` each child gets one; checked, and redone if
 * not). Resolves once /bench/hello answers 200 on every child.
 */
/**
 * BENCH_CHILD_NODE_ARGS='["--flag"]' overrides cluster.child_node_args (compare heap settings); read
 * when an engine starts, so a tool may set it first.
 */
const childNodeArgs = (): { child_node_args?: string[] } =>
  process.env.BENCH_CHILD_NODE_ARGS === undefined ? {} : { child_node_args: JSON.parse(process.env.BENCH_CHILD_NODE_ARGS) as string[] };

export async function startSwitchyard(
  processes: number,
  workers: WorkerSpec[],
  onePerChild = false,
  modules: { name: string; config?: Record<string, unknown> }[] = [],
  /** Another build's bin/switchyard.js (bench/lib/against.ts); default: this checkout's. */
  engineBin?: string,
): Promise<Engine> {
  const engine = await startEngine({
    cluster: { processes, ...childNodeArgs() },
    logLevel: 'warn',
    env: { SWITCHYARD_SERVED_BY_HEADER: '1' },
    modules,
    ...(engineBin === undefined ? {} : { engineBin }),
  });
  const running: ManagedProcess[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(running.map((w) => stopProcess(w, 'SIGTERM', 3000)));
    await engine.stop();
  };
  try {
    for (const spec of workers) {
      for (let attempt = 0; ; attempt++) {
        const worker = spawnWorker(engine, spec);
        running.push(worker);
        await worker.stdout.waitFor((l) => l === 'registered', 20_000, `${spec.script} registered`);
        const expected = running.length;
        const status = await until('worker count in /readyz', 5000, async () => {
          const r = await readyz(engine);
          return r.connectedWorkers >= expected ? r : undefined;
        });
        if (!onePerChild || status.children.every((c) => c.workers <= 1)) break;
        if (attempt >= 4) throw new Error('workers keep landing on the same engine process');
        running.pop();
        await stopProcess(worker, 'SIGTERM', 3000);
        await until('worker gone', 5000, async () => ((await readyz(engine)).connectedWorkers < expected ? true : undefined));
      }
    }
    const { children } = await readyz(engine);
    const clients = await clientPerPeer(engine, children.map((c) => c.peerId));
    await until('/bench/hello on every process', 10_000, async () => {
      const served = await Promise.all([...clients.values()].map((c) => probe(c, HELLO.path)));
      return served.every((s) => s.status === 200) ? true : undefined;
    });
    await Promise.all([...clients.values()].map((c) => c.close()));
    return { engine, children, workers: running, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}


export type Resource<T> = { get(): Promise<T>; stop(): Promise<void> };

export function resource<T>(start: () => Promise<T>, stop: (value: T) => Promise<void>): Resource<T> {
  let started: Promise<T> | undefined;
  return {
    get: () => (started ??= start()),
    stop: async () => {
      if (started === undefined) return;
      const value = await started.catch(() => undefined);
      started = undefined;
      if (value !== undefined) await stop(value);
    },
  };
}

export const baselineResource = (file: string, env: NodeJS.ProcessEnv = {}): Resource<Baseline> =>
  resource(() => startBaseline(file, env), (b) => b.stop());
export const engineResource = (
  processes: number,
  workers: WorkerSpec[],
  onePerChild = false,
  modules: { name: string; config?: Record<string, unknown> }[] = [],
  engineBin?: string,
): Resource<Engine> => resource(() => startSwitchyard(processes, workers, onePerChild, modules, engineBin), (e) => e.stop());
