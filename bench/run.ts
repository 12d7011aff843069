/**
 * The performance suite (npm run bench): Switchyard scenarios, each against a baseline measured in the
 * same run on the same machine, plus scale checks. Every figure is a ratio to its baseline, with the
 * absolute numbers beside it.
 *
 *   npx tsx bench/run.ts                   full run: 5 alternating rounds of 3 s (+1 s warm-up), 64 connections (~6 min)
 *   npx tsx bench/run.ts --smoke           CI: 1 short run each, small scale counts, no thresholds (~30 s)
 *   npx tsx bench/run.ts --only <text>     only the rows and checks whose name contains <text>
 *   npx tsx bench/run.ts --strict          exit 1 when a target fails (full mode)
 *
 * Baselines (bench/baselines/, no Switchyard code): (1) node:http hello world; (2) node:http + one ws
 * worker; (3) (2) in two node:cluster processes; (4) every request relayed to a sibling that owns the
 * worker; (5) two processes, the worker on one. The engine is the built one (dist/), started through
 * test/support/processes.ts. Results: stdout and .bench-results/latest.md (latest-smoke.md in smoke).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client, request } from 'undici';
import { parsePathPattern } from '../src/routing/path-pattern.js';
import type { RouteTarget } from '../src/routing/router.js';
import { Router } from '../src/routing/router.js';
import type { EngineHandle, ManagedProcess } from '../test/support/processes.js';
import { ROOT, spawnManaged, startEngine, stopProcess } from '../test/support/processes.js';
import { RawWorker } from '../test/support/raw-worker.js';
import type { LoadOptions, LoadResult } from './lib/load.js';
import { median, runLoad, runLoadOn } from './lib/load.js';

// ---------------------------------------------------------------------------------------------- options

const args = process.argv.slice(2);
const smoke = args.includes('--smoke');
const strict = args.includes('--strict');
const onlyAt = args.indexOf('--only');
const only = onlyAt === -1 ? undefined : args[onlyAt + 1]?.toLowerCase();
const selected = (name: string): boolean => only === undefined || name.toLowerCase().includes(only);

// Five short rounds rather than three long ones: this machine drifts over tens of seconds, and
// more alternations cancel more of it (same total time per subject).
const RUNS = smoke ? 1 : 5;
const CONNECTIONS = smoke ? 16 : 64;
const DURATION_MS = smoke ? 500 : 3000;
const WARMUP_MS = smoke ? 250 : 1000;
const SCALE_ROUTES = smoke ? 1000 : 10_000;
const SCALE_WORKERS = smoke ? 50 : 1000;
const MATCH_ITERATIONS = smoke ? 50_000 : 400_000;
const RSS_LIMIT_MB = 150;

const WORKERS_DIR = join(ROOT, 'bench', 'workers');
const BASELINES_DIR = join(ROOT, 'bench', 'baselines');
const ROUTES = 'GET /bench/hello,POST /bench/echo';
const SERVED_BY = 'x-switchyard-served-by';

// ------------------------------------------------------------------------------------------- requests

interface RequestSpec {
  path: string;
  method?: string;
  body?: Buffer;
  headers?: Record<string, string>;
}

/** A JSON document of realistic shape (an array of records), at least `bytes` long once serialised. */
function jsonBody(bytes: number): Buffer {
  const items: unknown[] = [];
  const doc = { order: 'A-1029', customer: { id: 7, name: 'Ann Example', tier: 'gold' }, items };
  while (JSON.stringify(doc).length < bytes) {
    const i = items.length;
    items.push({ sku: `SKU-${1000 + i}`, name: `item number ${i}`, qty: (i % 5) + 1, price: 9.99 + i, tags: ['a', 'b'] });
  }
  return Buffer.from(JSON.stringify(doc));
}

const HELLO: RequestSpec = { path: '/bench/hello' };
const bodySpec = (bytes: number): RequestSpec => ({
  path: '/bench/echo',
  method: 'POST',
  body: jsonBody(bytes),
  headers: { 'content-type': 'application/json' },
});
const BODY_1K = bodySpec(1024);
const BODY_64K = bodySpec(64 * 1024);

const loadOptions = (origin: string, spec: RequestSpec, extra: Partial<LoadOptions> = {}): LoadOptions => ({
  url: origin + spec.path,
  connections: CONNECTIONS,
  durationMs: DURATION_MS,
  warmupMs: WARMUP_MS,
  ...(spec.method === undefined ? {} : { method: spec.method }),
  ...(spec.body === undefined ? {} : { body: spec.body }),
  ...(spec.headers === undefined ? {} : { headers: spec.headers }),
  ...extra,
});

const FORWARDED_MARK = { header: SERVED_BY, test: (value: string) => value.endsWith('forwarded=true') };

// ------------------------------------------------------------------------------------------- processes

/** Stops a detached process group (a baseline and everything it started). */
async function stopGroup(p: ManagedProcess): Promise<void> {
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

interface Baseline {
  origin: string;
  /** Leader of the baseline's process group (its workers and cluster children are in the group). */
  pid: number;
  stop(): Promise<void>;
}

async function startBaseline(file: string, env: NodeJS.ProcessEnv = {}): Promise<Baseline> {
  const p = spawnManaged(process.execPath, [join(BASELINES_DIR, file)], { ...process.env, ...env }, ROOT, true);
  const exited = p.exited.then((r) => {
    throw new Error(`baseline ${file} exited before it was ready (${JSON.stringify(r)}): ${p.stderr.lines.slice(-10).join('\n')}`);
  });
  const line = await Promise.race([p.stdout.waitFor((l) => l.startsWith('port='), 30_000, `${file} port`), exited]);
  exited.catch(() => undefined);
  return { origin: `http://127.0.0.1:${line.slice('port='.length)}`, pid: p.child.pid as number, stop: () => stopGroup(p) };
}

interface ChildInfo {
  pid: number;
  peerId: string;
  workers: number;
}

async function readyz(engine: EngineHandle): Promise<{ connectedWorkers: number; children: ChildInfo[] }> {
  const res = await request(`${engine.adminUrl}/readyz`, { headersTimeout: 5000, bodyTimeout: 5000 });
  return (await res.body.json()) as { connectedWorkers: number; children: ChildInfo[] };
}

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>, everyMs = 25): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

interface Served {
  status: number;
  peer: string;
  forwarded: boolean;
}

async function probe(client: Client, path: string): Promise<Served> {
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
async function openPinned(origin: string, count: number, path: string, accept: (served: Served) => boolean): Promise<Client[]> {
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
async function clientPerPeer(engine: EngineHandle, peers: string[]): Promise<Map<string, Client>> {
  const byPeer = new Map<string, Client>();
  for (const peer of peers) {
    const [client] = await openPinned(engine.httpUrl, 1, '/__bench/pin', (s) => s.peer === peer);
    byPeer.set(peer, client as Client);
  }
  return byPeer;
}

async function rssMb(pid: number): Promise<number> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const kb = /VmRSS:\s+(\d+)\s+kB/.exec(status)?.[1];
    return kb === undefined ? Number.NaN : Number(kb) / 1024;
  } catch {
    return Number.NaN;
  }
}

/** Samples VmRSS of `pids` every 250 ms until stopped; resolves with the largest value seen for any. */
function sampleRss(pids: number[]): { stop(): Promise<number> } {
  let max = 0;
  const sample = async (): Promise<void> => {
    for (const pid of pids) {
      const mb = await rssMb(pid);
      if (mb > max) max = mb;
    }
  };
  const timer = setInterval(() => void sample(), 250);
  return {
    stop: async () => {
      clearInterval(timer);
      await sample();
      return max;
    },
  };
}


// ----------------------------------------------------------------------------------------- CPU time

/** Nanoseconds `pid` has spent on a CPU (schedstat; stat ticks when schedstat is off); NaN once gone. */
function cpuNs(pid: number): number {
  try {
    const ns = Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
    if (ns > 0) return ns;
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11]) + Number(fields[12])) * 1e7; // utime + stime, 100 ticks per second
  } catch {
    return Number.NaN;
  }
}

/** read + write system calls `pid` has made so far (/proc/<pid>/io syscr + syscw); NaN once gone. */
function syscalls(pid: number): number {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    return Number(/syscr: (\d+)/.exec(io)?.[1]) + Number(/syscw: (\d+)/.exec(io)?.[1]);
  } catch {
    return Number.NaN;
  }
}

/** Every live process whose process group is `pgid`, split into workers (bench/workers/) and the rest. */
function processGroup(pgid: number): { server: number[]; workers: number[] } {
  const server: number[] = [];
  const workers: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      if (Number(fields[2]) !== pgid) continue;
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      (cmdline.includes('/bench/workers/') ? workers : server).push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return { server, workers };
}

interface CpuCost {
  /** CPU per request of the server side (engine or baseline processes), microseconds. */
  serverUs: number;
  /** CPU per request of the worker processes, microseconds. */
  workerUs: number;
  /** The load generator's CPU over the window, in % of one core. */
  generatorPct: number;
  /** read + write system calls per request of the server side. */
  serverSyscalls: number;
}

/** Measures CPU of the given processes and of this one over the load's measured window. */
function cpuMeter(pids: { server: number[]; workers: number[] }): { hooks: { start(): void; end(): void }; cost(result: LoadResult): CpuCost } {
  const sum = (list: number[], at: Map<number, number>): number => list.reduce((total, pid) => total + (at.get(pid) ?? 0), 0);
  const snapshot = (): Map<number, number> => new Map([...pids.server, ...pids.workers].map((pid) => [pid, cpuNs(pid)]));
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
      };
    },
  };
}

interface Engine {
  engine: EngineHandle;
  children: ChildInfo[];
  workers: ManagedProcess[];
  stop(): Promise<void>;
}

interface WorkerSpec {
  script: 'raw-worker.mjs' | 'sdk-worker.mjs';
  env?: NodeJS.ProcessEnv;
}

function spawnWorker(engine: EngineHandle, spec: WorkerSpec): ManagedProcess {
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
/** BENCH_CHILD_NODE_ARGS='["--flag"]' overrides cluster.child_node_args (compare heap settings). */
const childNodeArgs: { child_node_args?: string[] } =
  process.env.BENCH_CHILD_NODE_ARGS === undefined ? {} : { child_node_args: JSON.parse(process.env.BENCH_CHILD_NODE_ARGS) as string[] };

async function startSwitchyard(processes: number, workers: WorkerSpec[], onePerChild = false): Promise<Engine> {
  const engine = await startEngine({ cluster: { processes, ...childNodeArgs }, logLevel: 'warn', env: { SWITCHYARD_SERVED_BY_HEADER: '1' } });
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

// --------------------------------------------------------------------------------------------- members

interface Sample extends LoadResult {
  /** Largest VmRSS of a server process during the run: an engine child, or a baseline process. */
  rssMb?: number;
  cpu: CpuCost;
}

/** One measured thing: a process setup (shared, started once per group) and a way to load it. */
interface Member {
  label: string;
  /** A Switchyard engine (its RSS counts against the engine's target). */
  engine: boolean;
  prepare(): Promise<unknown>;
  run(): Promise<Sample>;
}

type Resource<T> = { get(): Promise<T>; stop(): Promise<void> };

function resource<T>(start: () => Promise<T>, stop: (value: T) => Promise<void>): Resource<T> {
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

const baselineResource = (file: string, env: NodeJS.ProcessEnv = {}): Resource<Baseline> =>
  resource(() => startBaseline(file, env), (b) => b.stop());
const engineResource = (processes: number, workers: WorkerSpec[], onePerChild = false): Resource<Engine> =>
  resource(() => startSwitchyard(processes, workers, onePerChild), (e) => e.stop());

function baselineMember(label: string, res: Resource<Baseline>, spec: RequestSpec): Member {
  return {
    label,
    engine: false,
    prepare: () => res.get(),
    run: async () => {
      const baseline = await res.get();
      const pids = processGroup(baseline.pid);
      const meter = cpuMeter(pids);
      const rss = sampleRss(pids.server);
      const result = await runLoad(loadOptions(baseline.origin, spec, { onMeasure: meter.hooks }));
      return { ...result, rssMb: await rss.stop(), cpu: meter.cost(result) };
    },
  };
}

/** The engine's processes (primary and children: its process group) and the workers started for it. */
const enginePids = (setup: Engine): { server: number[]; workers: number[] } => ({
  server: processGroup(setup.engine.child.pid as number).server,
  workers: setup.workers.map((w) => w.child.pid as number),
});

/** Pool load on an engine (connections dealt by node:cluster), RSS of its children sampled meanwhile. */
function engineMember(label: string, res: Resource<Engine>, spec: RequestSpec, markForwarded = false): Member {
  return {
    label,
    engine: true,
    prepare: () => res.get(),
    run: async () => {
      const setup = await res.get();
      const meter = cpuMeter(enginePids(setup));
      const rss = sampleRss(setup.children.map((c) => c.pid));
      const result = await runLoad(loadOptions(setup.engine.httpUrl, spec, { onMeasure: meter.hooks, ...(markForwarded ? { mark: FORWARDED_MARK } : {}) }));
      return { ...result, rssMb: await rss.stop(), cpu: meter.cost(result) };
    },
  };
}

/** Every connection pinned to the process without the worker: 100 % of requests forwarded. */
function forcedForwardMember(label: string, res: Resource<Engine>, spec: RequestSpec): Member {
  return {
    label,
    engine: true,
    prepare: () => res.get(),
    run: async () => {
      const setup = await res.get();
      // Pinned just before the run: the engine closes idle keep-alive connections after 5 s.
      const clients = await openPinned(setup.engine.httpUrl, CONNECTIONS, spec.path, (s) => s.status === 200 && s.forwarded);
      const meter = cpuMeter(enginePids(setup));
      const rss = sampleRss(setup.children.map((c) => c.pid));
      try {
        const result = await runLoadOn(clients, loadOptions(setup.engine.httpUrl, spec, { mark: FORWARDED_MARK, onMeasure: meter.hooks }));
        return { ...result, rssMb: await rss.stop(), cpu: meter.cost(result) };
      } finally {
        await Promise.all(clients.map((c) => c.close()));
      }
    },
  };
}

// ------------------------------------------------------------------------------------------ the suite

interface Row {
  name: string;
  scenario: string;
  baseline: string;
  /** Throughput ratio to reach (p99 may grow by at most its inverse); none: informational. */
  target?: number;
  /** The row's target is a per-middleware cost of at most 10 %, over `middlewares`. */
  middlewares?: number;
  /** Informational: note the cost per middleware over this many, no target. */
  middlewareNote?: number;
  /** Show the forwarded share of the scenario's requests. */
  forwarded?: boolean;
}

interface Group {
  name: string;
  resources: Resource<unknown>[];
  members: Record<string, Member>;
  /** Run order within a round: baselines and scenarios alternate. */
  order: string[];
  rows: Row[];
}

function suite(): Group[] {
  const b1 = baselineResource('1-http.mjs');
  const b2 = baselineResource('2-ws-worker.mjs');
  const b2sdk = baselineResource('2-ws-worker.mjs', { WORKER: 'sdk' });
  const b2mw = baselineResource('2-ws-worker.mjs', { MIDDLEWARE: '1' });
  const sy1 = engineResource(1, [{ script: 'raw-worker.mjs' }]);
  const sy1sdk = engineResource(1, [{ script: 'sdk-worker.mjs' }]);
  const sy1mw = engineResource(1, [{ script: 'raw-worker.mjs', env: { MIDDLEWARE: '1' } }]);
  // Bodies get processes of their own: after 64 KiB bodies a process's heap is larger, which would
  // colour the GET measurements of a process shared with them.
  const b2body = baselineResource('2-ws-worker.mjs');
  const sy1body = engineResource(1, [{ script: 'raw-worker.mjs' }]);
  const local: Group = {
    name: 'one process',
    resources: [b1, b2, b2sdk, b2mw, sy1, sy1sdk, sy1mw, b2body, sy1body],
    members: {
      b1: baselineMember('(1) node:http hello', b1, HELLO),
      b2: baselineMember('(2) http + ws worker', b2, HELLO),
      b2sdk: baselineMember('(2) with iii-sdk worker', b2sdk, HELLO),
      sy1: engineMember('Switchyard, raw worker', sy1, HELLO),
      sy1sdk: engineMember('Switchyard, iii-sdk worker', sy1sdk, HELLO),
      sy1mw: engineMember('Switchyard + 3 middleware', sy1mw, HELLO),
      b2mw: baselineMember('(2) + round trips of 3 middleware', b2mw, HELLO),
      b2k1: baselineMember('(2), 1 KiB body', b2body, BODY_1K),
      sy1k1: engineMember('Switchyard, 1 KiB body', sy1body, BODY_1K),
      b2k64: baselineMember('(2), 64 KiB body', b2body, BODY_64K),
      sy1k64: engineMember('Switchyard, 64 KiB body', sy1body, BODY_64K),
    },
    order: ['b1', 'b2', 'sy1', 'sy1mw', 'b2mw', 'b2sdk', 'sy1sdk', 'b2k1', 'sy1k1', 'b2k64', 'sy1k64'],
    rows: [
      { name: 'local: processes 1, raw ws worker, GET', scenario: 'sy1', baseline: 'b2', target: 0.85 },
      { name: 'local: processes 1, iii-sdk worker, GET', scenario: 'sy1sdk', baseline: 'b2sdk', target: 0.85 },
      { name: 'local: 1 KiB JSON body echoed (POST)', scenario: 'sy1k1', baseline: 'b2k1', target: 0.85 },
      { name: 'local: 64 KiB JSON body echoed (POST)', scenario: 'sy1k64', baseline: 'b2k64', target: 0.85 },
      { name: 'local: 3 middleware in scope (onRequest, preHandler, postHandler)', scenario: 'sy1mw', baseline: 'sy1', middlewares: 3 },
      { name: 'local: 3 middleware against the same round trips in (2)', scenario: 'sy1mw', baseline: 'b2mw', target: 0.85 },
      { name: 'info: the limit for middleware, (2) with the round trips of 3 middleware against (2)', scenario: 'b2mw', baseline: 'b2', middlewareNote: 3 },
      { name: 'info: baseline (2) against (1), the cost of the worker hop', scenario: 'b2', baseline: 'b1' },
      { name: 'info: iii-sdk cost, baseline (2) with iii-sdk worker against raw worker', scenario: 'b2sdk', baseline: 'b2' },
      { name: 'info: iii-sdk cost, Switchyard with iii-sdk worker against raw worker', scenario: 'sy1sdk', baseline: 'sy1' },
    ],
  };

  const b3 = baselineResource('3-cluster.mjs');
  const sy2each = engineResource(2, [{ script: 'raw-worker.mjs' }, { script: 'raw-worker.mjs' }], true);
  const two: Group = {
    name: 'two processes, a worker on each',
    resources: [b3, sy2each],
    members: {
      b3: baselineMember('(3) 2 cluster processes', b3, HELLO),
      sy2each: engineMember('Switchyard, processes 2', sy2each, HELLO, true),
    },
    order: ['b3', 'sy2each'],
    rows: [{ name: 'processes 2, a raw worker on each', scenario: 'sy2each', baseline: 'b3', target: 0.85, forwarded: true }],
  };

  const b4 = baselineResource('4-relay.mjs');
  const b5 = baselineResource('5-cluster-half.mjs');
  const sy2one = engineResource(2, [{ script: 'raw-worker.mjs' }]);
  const forwarded: Group = {
    name: 'two processes, one worker',
    resources: [b4, b5, sy2one],
    members: {
      b4: baselineMember('(4) relay, every request', b4, HELLO),
      sy2fwd: forcedForwardMember('Switchyard, all forwarded', sy2one, HELLO),
      b5: baselineMember('(5) cluster, half relayed', b5, HELLO),
      sy2half: engineMember('Switchyard, half forwarded', sy2one, HELLO, true),
    },
    order: ['b4', 'sy2fwd', 'b5', 'sy2half'],
    rows: [
      { name: 'processes 2, worker on one child, every request forwarded', scenario: 'sy2fwd', baseline: 'b4', target: 0.85, forwarded: true },
      { name: 'processes 2, worker on one child, connections dealt by node:cluster (half forwarded)', scenario: 'sy2half', baseline: 'b5', target: 0.85, forwarded: true },
    ],
  };
  return [local, two, forwarded];
}

// ------------------------------------------------------------------------------------------- reporting

const int = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a');
const ms = (n: number): string => (Number.isFinite(n) ? n.toFixed(2) : 'n/a');
const spread = (values: number[], fmt: (n: number) => string): string =>
  values.length === 1 ? fmt(values[0] as number) : `${fmt(median(values))} (${fmt(Math.min(...values))}–${fmt(Math.max(...values))})`;

interface Verdict {
  pass: boolean | undefined;
  text: string;
}

function verdict(row: Row, samples: Record<string, Sample[]>, pairedWith: string): { cells: string[]; verdict: Verdict } {
  const s = samples[row.scenario] ?? [];
  const b = samples[row.baseline] ?? [];
  // Ratios are taken within each round (the two ran seconds apart), then the median over rounds.
  const perRound = (pick: (x: Sample) => number): number =>
    median(s.map((x, i) => pick(x) / pick(b[i] as Sample)).filter((r) => Number.isFinite(r)));
  const ratio = perRound((x) => x.rps);
  const p99Ratio = perRound((x) => x.p99Ms);
  const errors = s.reduce((sum, x) => sum + x.errors, 0);
  const required = row.middlewares !== undefined ? 1 - 0.1 * row.middlewares : row.target;
  let targetText = '—';
  let result: Verdict = { pass: undefined, text: 'info' };
  const notes: string[] = [];
  const perMiddleware = row.middlewares ?? row.middlewareNote;
  if (perMiddleware !== undefined) {
    notes.push(`cost per middleware ${(((1 - ratio) / perMiddleware) * 100).toFixed(1)} % of a plain request`);
  }
  if (required !== undefined) {
    targetText = row.middlewares !== undefined ? `≤ 10 %/mw (≥ ${required.toFixed(2)})` : `≥ ${required.toFixed(2)}`;
    const pass = ratio >= required && p99Ratio <= 1 / required && errors === 0;
    result = { pass, text: smoke ? `(${pass ? 'pass' : 'fail'}, smoke)` : pass ? '**PASS**' : '**FAIL**' };
    if (ratio >= required && p99Ratio > 1 / required) notes.push('p99 grew more than throughput fell');
    if (errors > 0) notes.push(`${errors} errors`);
  }
  if (row.forwarded === true) {
    const total = s.reduce((sum, x) => sum + x.requests, 0);
    const marked = s.reduce((sum, x) => sum + x.marked, 0);
    notes.push(`${((marked / Math.max(total, 1)) * 100).toFixed(1)} % forwarded`);
  }
  const maxRss = (xs: Sample[]): string => {
    const values = xs.map((x) => x.rssMb).filter((x): x is number => x !== undefined);
    return values.length === 0 ? '—' : Math.max(...values).toFixed(0);
  };
  const side = (xs: Sample[]): string[] => [
    spread(xs.map((x) => x.rps), int),
    spread(xs.map((x) => x.p50Ms), ms),
    spread(xs.map((x) => x.p99Ms), ms),
    String(xs.reduce((sum, x) => sum + x.errors, 0)),
    `${median(xs.map((x) => x.cpu.serverUs)).toFixed(0)} + ${median(xs.map((x) => x.cpu.workerUs)).toFixed(0)}`,
    median(xs.map((x) => x.cpu.serverSyscalls)).toFixed(1),
  ];
  return {
    cells: [
      row.name,
      pairedWith,
      ...side(s),
      ...side(b),
      ratio.toFixed(2),
      p99Ratio.toFixed(2),
      perRound((x) => x.cpu.serverUs).toFixed(2),
      targetText,
      result.text,
      `${maxRss(s)} / ${maxRss(b)}`,
      notes.join('; '),
    ],
    verdict: result,
  };
}

const HEADER = [
  'scenario',
  'paired with',
  'req/s',
  'p50 ms',
  'p99 ms',
  'err',
  'CPU µs/req server + workers',
  'server syscalls/req',
  'baseline req/s',
  'baseline p50 ms',
  'baseline p99 ms',
  'baseline err',
  'baseline CPU µs/req',
  'baseline syscalls/req',
  'ratio req/s',
  'ratio p99',
  'ratio server CPU/req',
  'target (req/s ratio)',
  'result',
  'max RSS MB per process (scenario / baseline)',
  'notes',
];

const tableRow = (cells: string[]): string => `| ${cells.join(' | ')} |`;

// ----------------------------------------------------------------------------------------- scale checks

interface ScaleRow {
  check: string;
  result: string;
  target: string;
  pass: boolean | undefined;
}

const passText = (pass: boolean | undefined): string =>
  pass === undefined ? 'info' : smoke ? `(${pass ? 'pass' : 'fail'}, smoke)` : pass ? '**PASS**' : '**FAIL**';

/** (a) One worker registers SCALE_ROUTES routes; time until the last is servable on every process. */
async function scaleRoutes(): Promise<ScaleRow[]> {
  const engine = await startEngine({ cluster: { processes: 2 }, logLevel: 'warn', env: { SWITCHYARD_SERVED_BY_HEADER: '1' } });
  const worker = await RawWorker.connect(engine.workerUrl);
  try {
    const { children } = await readyz(engine);
    const clients = await clientPerPeer(engine, children.map((c) => c.peerId));
    await worker.ofType('workerregistered');
    worker.serve('scale::fn', () => ({ status_code: 200, headers: { 'content-type': 'application/json' }, body: { ok: true } }));
    const pathOf = (k: number): string => (k % 2 === 0 ? `/scale/r${k}` : `/scale/r${k}/items/:id`);
    const probePath = (k: number): string => pathOf(k).replace(':id', '7');
    const last = SCALE_ROUTES - 1;
    const started = performance.now();
    worker.send({ type: 'registerfunction', id: 'scale::fn' });
    for (let k = 0; k < SCALE_ROUTES; k++) {
      worker.send({ type: 'registertrigger', id: `s${k}`, trigger_type: 'http', function_id: 'scale::fn', config: { api_path: pathOf(k), http_method: 'GET' } });
    }
    const sentMs = performance.now() - started;
    const times = await Promise.all(
      [...clients.values()].map((client) =>
        until('the last route', 30_000, async () => ((await probe(client, probePath(last))).status === 200 ? performance.now() - started : undefined), 5),
      ),
    );
    // Spot check: a sample of every route shape answers on every process.
    let ok = 0;
    let tried = 0;
    for (const client of clients.values()) {
      for (let k = 0; k < SCALE_ROUTES; k += Math.max(1, Math.floor(SCALE_ROUTES / 200))) {
        tried++;
        if ((await probe(client, probePath(k))).status === 200) ok++;
      }
    }
    await Promise.all([...clients.values()].map((c) => c.close()));
    const slowest = Math.max(...times);
    return [
      {
        check: `(a) ${int(SCALE_ROUTES)} routes registered by one worker → the last servable on every process (processes 2)`,
        result: `${int(slowest)} ms (per process: ${times.map(int).join(', ')} ms; frames sent in ${int(sentMs)} ms; spot check ${ok}/${tried} routes answer 200)`,
        target: '≤ 2,000 ms',
        pass: slowest <= 2000 && ok === tried,
      },
    ];
  } finally {
    await worker.close();
    await engine.stop();
  }
}

interface BenchRoute extends RouteTarget {
  path: string;
}

/** Route shapes of a REST service: statics, one and two parameters, a second namespace. */
function routeSource(k: number): string {
  const r = `r${k}`;
  switch (k % 4) {
    case 0:
      return `/api/v1/${r}`;
    case 1:
      return `/api/v1/${r}/:id`;
    case 2:
      return `/api/v1/${r}/:id/items/:itemId`;
    default:
      return `/svc/${r}/status`;
  }
}

interface MatchRequest {
  method: string;
  path: string;
}

/**
 * 4 096 requests on the first `distinct` routes: three in four hit a route (parameters filled), one
 * in four misses in one of three ways (unknown segment, dead end after a parameter, wrong method).
 */
function matchRequests(routes: BenchRoute[], distinct: number): MatchRequest[] {
  const requests: MatchRequest[] = [];
  for (let i = 0; i < 4096; i++) {
    const k = (i * 7919) % distinct;
    const route = routes[k] as BenchRoute;
    if (i % 4 !== 3) requests.push({ method: route.method, path: route.path.replace(':id', String(i % 97)).replace(':itemId', 'x9') });
    else if (i % 3 === 0) requests.push({ method: 'GET', path: `/api/v1/none${k}` });
    else if (i % 3 === 1) requests.push({ method: 'GET', path: `/api/v1/r${k}/1/unknown` });
    else requests.push({ method: 'DELETE', path: route.path.replace(':id', '1').replace(':itemId', '2') });
  }
  return requests;
}

interface MatchSetup {
  size: number;
  router: Router<BenchRoute>;
  buildMs: number;
  /** The same requests for every size: routes 0–9 exist in every table. */
  same: MatchRequest[];
  /** Requests spread over all of this table's routes. */
  spread: MatchRequest[];
}

function matchSetup(size: number): MatchSetup {
  const routes: BenchRoute[] = [];
  for (let k = 0; k < size; k++) {
    const parsed = parsePathPattern(routeSource(k), false);
    if (!parsed.ok) throw new Error(parsed.message);
    routes.push({ method: k % 5 === 4 ? 'POST' : 'GET', pattern: parsed.pattern, path: routeSource(k) });
  }
  const buildStart = performance.now();
  const router = new Router(routes, false);
  const buildMs = performance.now() - buildStart;
  return { size, router, buildMs, same: matchRequests(routes, 10), spread: matchRequests(routes, size) };
}

/** ns per match of `requests` on `router`, over `iterations` matches. */
function timeMatches(router: Router<BenchRoute>, requests: MatchRequest[], iterations: number): number {
  let hits = 0;
  const start = performance.now();
  for (let i = 0; i < iterations; i++) {
    const r = requests[i & 4095] as MatchRequest;
    if (router.match(r.method, r.path).kind === 'matched') hits++;
  }
  const ns = ((performance.now() - start) * 1e6) / iterations;
  if (hits === 0) throw new Error('no route matched');
  return ns;
}

/**
 * (b) Route match time for 10, 1 000 and 10 000 routes, in process (src/routing/router.ts). The
 * target compares the same requests on tables of each size (what the size itself costs); requests
 * spread over every route of the table are shown beside it (they add the cost of a working set that
 * no longer fits the CPU caches, which any table of that many routes pays).
 */
function scaleMatch(): ScaleRow[] {
  const setups = [10, 1000, 10_000].map(matchSetup);
  for (const setup of setups) {
    timeMatches(setup.router, setup.same, MATCH_ITERATIONS / 4);
    timeMatches(setup.router, setup.spread, MATCH_ITERATIONS / 4);
  }
  // Sizes take turns, three rounds, medians: drift of the machine hits every size alike.
  const same = setups.map(() => [] as number[]);
  const spread = setups.map(() => [] as number[]);
  for (let round = 0; round < 3; round++) {
    setups.forEach((setup, i) => {
      same[i]?.push(timeMatches(setup.router, setup.same, MATCH_ITERATIONS));
      spread[i]?.push(timeMatches(setup.router, setup.spread, MATCH_ITERATIONS));
    });
  }
  const sameNs = same.map(median);
  const spreadNs = spread.map(median);
  const ratio = (sameNs[2] as number) / (sameNs[0] as number);
  const spreadRatio = (spreadNs[2] as number) / (spreadNs[0] as number);
  const list = (values: number[]): string => values.map((v) => `${v.toFixed(0)} ns`).join(' / ');
  return [
    {
      check: '(b) route match time, 10 / 1,000 / 10,000 routes (in process; 75 % hits, 25 % misses)',
      result:
        `same requests on each table: ${list(sameNs)} per match, 10,000 ÷ 10 = ${ratio.toFixed(2)}; ` +
        `requests spread over all routes: ${list(spreadNs)}, ÷ ${spreadRatio.toFixed(2)} (cache misses of a large working set); ` +
        `router build for 10,000 routes ${(setups[2] as MatchSetup).buildMs.toFixed(1)} ms`,
      target: 'flat: same requests ÷ ≤ 1.5',
      pass: ratio <= 1.5,
    },
  ];
}

/** (c) SCALE_WORKERS connected workers, one route each: all servable, the engine still responsive. */
async function scaleWorkers(): Promise<ScaleRow[]> {
  const sy = await startSwitchyard(2, [{ script: 'raw-worker.mjs' }]);
  let many: ManagedProcess | undefined;
  try {
    const pids = sy.children.map((c) => c.pid);
    const short = { durationMs: smoke ? DURATION_MS : 3000, warmupMs: WARMUP_MS };
    const rssBeforeLoad = Math.max(...(await Promise.all(pids.map(rssMb))));
    // Three short runs each side, medians compared: one 3 s run's p99 swung ×1–×2 between identical runs.
    const loadRuns = async (): Promise<{ rps: number; p99Ms: number; errors: number }> => {
      const runs: LoadResult[] = [];
      for (let i = 0; i < (smoke ? 1 : 3); i++) runs.push(await runLoad(loadOptions(sy.engine.httpUrl, HELLO, short)));
      return { rps: median(runs.map((r) => r.rps)), p99Ms: median(runs.map((r) => r.p99Ms)), errors: runs.reduce((n, r) => n + r.errors, 0) };
    };
    const before = await loadRuns();
    const started = performance.now();
    many = spawnManaged(process.execPath, [join(WORKERS_DIR, 'many-workers.mjs')], { ...process.env, III_URL: sy.engine.workerUrl, COUNT: String(SCALE_WORKERS) });
    await many.stdout.waitFor((l) => l.startsWith('registered '), 120_000, 'many workers registered');
    const registeredMs = performance.now() - started;
    const clients = await clientPerPeer(sy.engine, sy.children.map((c) => c.peerId));
    // Every route on every process (the last one first: once it answers, the table holds them all).
    await Promise.all(
      [...clients.values()].map((client) =>
        until('the last worker route', 30_000, async () => ((await probe(client, `/many/${SCALE_WORKERS - 1}`)).status === 200 ? true : undefined), 5),
      ),
    );
    const servableMs = performance.now() - started;
    let ok = 0;
    await Promise.all(
      [...clients.values()].map(async (client) => {
        for (let i = 0; i < SCALE_WORKERS; i++) if ((await probe(client, `/many/${i}`)).status === 200) ok++;
      }),
    );
    await Promise.all([...clients.values()].map((c) => c.close()));
    const status = await readyz(sy.engine);
    const rssIdle = Math.max(...(await Promise.all(pids.map(rssMb))));
    const rss = sampleRss(pids);
    const during = await loadRuns();
    const rssLoad = await rss.stop();
    const p99Ratio = during.p99Ms / before.p99Ms;
    const expected = SCALE_WORKERS * clients.size;
    return [
      {
        check: `(c) ${int(SCALE_WORKERS)} connected raw workers, one route each (processes 2)`,
        result:
          `${ok}/${expected} route probes answer 200 (${clients.size} processes); ${status.connectedWorkers} workers connected; ` +
          `all registered in ${int(registeredMs)} ms, servable everywhere in ${int(servableMs)} ms; ` +
          `plain GET before → with them (median of ${smoke ? 1 : 3} runs): ${int(before.rps)} → ${int(during.rps)} req/s, p99 ${ms(before.p99Ms)} → ${ms(during.p99Ms)} ms (×${p99Ratio.toFixed(2)}), errors ${before.errors + during.errors}; ` +
          `max child RSS ${rssBeforeLoad.toFixed(0)} MB before, ${rssIdle.toFixed(0)} MB idle with them, ${rssLoad.toFixed(0)} MB under load`,
        target: `all answer; p99 ×≤ 1.5; RSS ≤ ${RSS_LIMIT_MB} MB`,
        pass: ok === expected && p99Ratio <= 1.5 && rssLoad <= RSS_LIMIT_MB && during.errors === 0,
      },
    ];
  } finally {
    if (many !== undefined) await stopProcess(many, 'SIGTERM', 3000);
    await sy.stop();
  }
}

// ------------------------------------------------------------------------------------------------ main

async function main(): Promise<void> {
  const began = performance.now();
  const loadStart = loadavg();
  const lines: string[] = [];
  const say = (line = ''): void => {
    lines.push(line);
  };
  const progress = (text: string): void => {
    process.stderr.write(`[bench ${((performance.now() - began) / 1000).toFixed(0).padStart(3)} s] ${text}\n`);
  };

  const samples: Record<string, Sample[]> = {};
  const rowsOut: string[] = [];
  const verdicts: Verdict[] = [];
  const groupLoads: string[] = [];
  const rssAll: number[] = [];
  const allGenerator: number[] = [];

  for (const group of suite()) {
    const rows = group.rows.filter((r) => selected(r.name));
    if (rows.length === 0) continue;
    const needed = new Set(rows.flatMap((r) => [r.scenario, r.baseline]));
    const order = group.order.filter((id) => needed.has(id));
    progress(`${group.name}: starting ${order.length} setups`);
    try {
      await Promise.all(order.map((id) => (group.members[id] as Member).prepare()));
      groupLoads.push(`${group.name}: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
      for (let round = 0; round < RUNS; round++) {
        // Every other round runs backwards, so a steady drift of the machine favours neither side of a pair.
        for (const id of round % 2 === 0 ? order : [...order].reverse()) {
          const member = group.members[id] as Member;
          const sample = await member.run();
          (samples[id] ??= []).push(sample);
          if (member.engine && sample.rssMb !== undefined) rssAll.push(sample.rssMb);
          allGenerator.push(sample.cpu.generatorPct);
          progress(
            `  round ${round + 1}/${RUNS} ${member.label}: ${int(sample.rps)} req/s, p99 ${ms(sample.p99Ms)} ms, errors ${sample.errors}, ` +
              `CPU µs/req ${sample.cpu.serverUs.toFixed(0)} + ${sample.cpu.workerUs.toFixed(0)}, ` +
              `syscalls/req ${sample.cpu.serverSyscalls.toFixed(2)} (generator ${sample.cpu.generatorPct.toFixed(0)} %)`,
          );
        }
      }
    } finally {
      await Promise.all(group.resources.map((r) => r.stop()));
    }
    for (const row of rows) {
      const { cells, verdict: v } = verdict(row, samples, (group.members[row.baseline] as Member).label);
      rowsOut.push(tableRow(cells));
      verdicts.push(v);
    }
  }

  const scaleRows: ScaleRow[] = [];
  const checks: [string, () => Promise<ScaleRow[]> | ScaleRow[]][] = [
    ['scale: routes registered by one worker', scaleRoutes],
    ['scale: route match time', scaleMatch],
    ['scale: connected workers', scaleWorkers],
  ];
  for (const [name, check] of checks) {
    if (!selected(name)) continue;
    progress(name);
    scaleRows.push(...(await check()));
  }

  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  say(`## Switchyard benchmark${smoke ? ' (smoke: no thresholds)' : ''}`);
  say();
  say(
    `${new Date().toISOString()} · node ${process.version} · ${cpus().length} CPUs (${cpu}) · ` +
      `load average at start ${loadStart.map((l) => l.toFixed(2)).join(' ')}, at end ${loadavg().map((l) => l.toFixed(2)).join(' ')}`,
  );
  say();
  say(
    `Closed loop (undici, ${CONNECTIONS} keep-alive connections), ${RUNS} run${RUNS > 1 ? 's' : ''} of ${DURATION_MS / 1000} s after ${WARMUP_MS / 1000} s of warm-up per subject; ` +
      'subjects of a group run in turn (baseline, scenario, …; every other round backwards) so noise hits both. Figures: median (min–max). ' +
      'ratio = scenario ÷ baseline within each round, median over the rounds. PASS: ratio req/s ≥ target, ratio p99 ≤ 1 ÷ target (the tail grows no more ' +
      'than throughput falls), no errors. The load generator, the engine (or baseline) and the workers share the CPUs. ' +
      'CPU µs/req: CPU time of the server processes (engine primary + children, or the baseline\'s) + of the worker processes, per request of the ' +
      'measured window (from /proc); it does not depend on how the CPUs were shared.' +
      (allGenerator.length === 0 ? '' : ` The load generator itself used a median ${median(allGenerator).toFixed(0)} % of one core.`),
  );
  if (rowsOut.length > 0) {
    say();
    say(tableRow(HEADER));
    say(tableRow(HEADER.map((_, i) => (i >= 2 && i <= 17 ? '---:' : '---'))));
    for (const row of rowsOut) say(row);
    say();
    say(`Baselines (bench/baselines/): (1) node:http hello world; (2) node:http → one JSON invokefunction frame over one ws socket → worker process; ` +
      `(3) (2) in two node:cluster processes, a worker each; (4) one process relays every request to a sibling owning the worker ` +
      `(Unix socket, length-prefixed frames multiplexed by id, JSON text, writes batched per tick); (5) two node:cluster processes, the worker on one, the other relays as (4).`);
    say();
    say(`Load average (1, 5, 15 min) when each group started: ${groupLoads.join('; ')}.`);
    if (rssAll.length > 0) {
      const maxRss = Math.max(...rssAll);
      const pass = maxRss <= RSS_LIMIT_MB;
      verdicts.push({ pass, text: '' });
      say();
      say(`Engine RSS per child under load (max over every Switchyard run): ${maxRss.toFixed(0)} MB (target ≤ ${RSS_LIMIT_MB} MB): ${passText(pass)}`);
    }
  }
  if (scaleRows.length > 0) {
    say();
    say('### Scale');
    say();
    say('| check | result | target | result |');
    say('|---|---|---|---|');
    for (const r of scaleRows) {
      say(`| ${r.check} | ${r.result} | ${r.target} | ${passText(r.pass)} |`);
      verdicts.push({ pass: r.pass, text: '' });
    }
  }
  const judged = verdicts.filter((v) => v.pass !== undefined);
  const failed = judged.filter((v) => v.pass === false).length;
  say();
  say(`${judged.length - failed} of ${judged.length} targets met${smoke ? ' (smoke: not enforced)' : ''}. Took ${((performance.now() - began) / 1000).toFixed(0)} s.`);

  const markdown = lines.join('\n') + '\n';
  console.log(`\n${markdown}`);
  const dir = join(ROOT, '.bench-results');
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, smoke ? 'latest-smoke.md' : 'latest.md'), markdown);
  process.exit(strict && !smoke && failed > 0 ? 1 : 0);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
