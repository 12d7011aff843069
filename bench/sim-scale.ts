/**
 * Issue 28: N Redis-mode nodes (one engine process each) on this machine, their own redis-server on a
 * free port, synthetic raw-ws workers holding R routes in total and reconnecting at a chosen rate.
 * Loopback only, bounded in time. Prints, per (N, R, churn):
 * - registration → servable on every node, p50/p99 (a probe worker registers a route; every node's
 *   HTTP port is polled until it answers 200);
 * - Redis commands, PUBLISHes and deliveries per second, bytes in/out per second (INFO deltas), idle
 *   and under churn, and the Redis egress of one registration (idle egress subtracted);
 * - each node's CPU (ms per s, primary + child) and child RSS, idle and under churn;
 * - forward connections per child (established TCP links between engine children).
 * `--chaos`: nodes other than the first two are killed (SIGKILL, no goodbye) and restarted under
 * churn while a steady route on node 0 is requested through node 1 the whole time.
 * `--warmup S`: S seconds of churn before the measured window (its RSS curve printed apart).
 *
 * Run: npm run sim:scale -- --nodes 4,8 --routes 100,1000 --churn 2 --seconds 10 [--chaos]
 * R is the number of routes in the whole cluster, spread over one bulk worker per node.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { RawWorker } from '../test/support/raw-worker.js';
import type { EngineHandle } from '../test/support/processes.js';
import { startEngine } from '../test/support/processes.js';
import type { RedisServer } from '../test/support/redis.js';
import { startRedisServer } from '../test/support/redis.js';
import { ageMin, fmt, pct, printMappings, printRss, rssByMapping, rssMb, rssParts, slope } from './lib/sim-rss.js';
import type { RssSeries } from './lib/sim-rss.js';
import { printSpaces, spacesSeries } from './lib/sim-gc-spaces.js';

const argv = process.argv.slice(2);
const arg = (name: string, fallback: string): string => {
  const at = argv.indexOf(`--${name}`);
  return at === -1 ? fallback : (argv[at + 1] ?? fallback);
};
const list = (name: string, fallback: string): number[] => arg(name, fallback).split(',').map(Number);
const NODES = list('nodes', '4');
const ROUTES = list('routes', '100');
const CHURN = list('churn', '2'); // worker reconnects per second, cluster-wide
const SECONDS = Number(arg('seconds', '10')); // churn phase length
// `--warmup S`: churn (and probes) run S seconds before the measured window; every figure under churn
// is of the window only, and the warm-up's own RSS curve is printed apart (V8 sizes its heap to the
// allocation rate in the first minutes of churn: that ramp is not growth over the window).
const WARMUP_SECONDS = Number(arg('warmup', '0'));
const IDLE_SECONDS = Number(arg('idle', '5'));
const PROBES = Number(arg('probes', '10'));
const CHAOS = argv.includes('--chaos');
const CHURN_ROUTES = 5;
const RSS_EVERY_MS = Number(arg('rss-every', '10')) * 1000; // routes each churn worker registers per connection
const SECRET = 'sim-scale-secret';
const HEARTBEAT_MS = Number(arg('heartbeat', '1000'));
const LEASE_MS = Number(arg('lease', '5000'));
// `--profile K`: node K runs with --cpu-prof (primary and child write a .cpuprofile into
// `--profile-dir`, default .bench-results/profiles, when it is stopped at the end of each scenario).
const PROFILE_NODE = argv.includes('--profile') ? Number(arg('profile', '0')) : -1;
const PROFILE_DIR = resolve(arg('profile-dir', '.bench-results/profiles'));
// `--trace-gc K`: node K runs with --trace-gc; its child's heap after each full (mark-compact) GC under
// churn is printed: the live heap, which RSS (sized by the GC's own heuristics) only bounds from above.
const TRACE_GC_NODE = argv.includes('--trace-gc') ? Number(arg('trace-gc', '0')) : -1;
// `--heap-snapshots K`: node K's child writes a heap snapshot (after a full GC) when the measured window
// starts and when it ends, into `--profile-dir`; `node bench/heap-diff.mjs A B` says what grew. Each
// snapshot stops that child for a second or two: a diagnostic run, not one whose latencies count.
const SNAPSHOT_NODE = argv.includes('--heap-snapshots') ? Number(arg('heap-snapshots', '0')) : -1;
// `--gc-spaces`: every node's child runs with --trace-gc-verbose; per node, what V8's new space and its
// other spaces committed over the measured window is printed beside the RSS rise (which of the two rose).
const GC_SPACES = argv.includes('--gc-spaces');
// `--smaps`: each RSS sample of the measured window also reads the child's /proc/<pid>/smaps, and the
// rise is printed per kind of mapping (glibc's main arena, other anonymous memory, files).
const SMAPS = argv.includes('--smaps');
// `--child-args "--flag=v …"`: every node's cluster.child_node_args, in place of the engine's default
// (an A/B of the children's V8 settings); `--child-args ""` gives V8's own defaults.
const CHILD_ARGS = argv.includes('--child-args') ? arg('child-args', '').split(/\s+/).filter((a) => a !== '') : undefined;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Until process `pid` has written its `count`-th heap snapshot into PROFILE_DIR (Node names them
 * `Heap.<date>.<time>.<pid>.<thread>.<seq>.heapsnapshot`) and its size has held for a second; at most 60 s.
 */
async function snapshotsWritten(pid: number, count: number): Promise<void> {
  const suffix = `.${pid}.0.${String(count).padStart(3, '0')}.heapsnapshot`;
  let size = -1;
  for (let waited = 0; waited < 60_000; waited += 1000) {
    const file = readdirSync(PROFILE_DIR).find((name) => name.endsWith(suffix));
    const now = file === undefined ? -1 : statSync(resolve(PROFILE_DIR, file)).size;
    if (now > 0 && now === size) return;
    size = now;
    await sleep(1000);
  }
  console.log(`heap snapshot ${count} of ${pid} not written within 60 s`);
}


interface Node {
  index: number;
  engine: EngineHandle;
  primaryPid: number;
  childPid: number;
}

function childOf(pid: number): number {
  const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  const first = Number(text.split(/\s+/)[0]);
  if (!Number.isFinite(first) || first === 0) throw new Error(`no child of ${pid}`);
  return first;
}

/** utime + stime of a process in ms (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return Number.NaN;
  }
}



interface RedisSample {
  at: number;
  inBytes: number;
  outBytes: number;
  commands: number;
  publishes: number;
}

async function redisSample(redis: Redis): Promise<RedisSample> {
  const stats = await redis.info('stats');
  const cmd = await redis.info('commandstats');
  const num = (text: string, key: string): number => Number(new RegExp(`${key}:(\\d+)`).exec(text)?.[1] ?? 0);
  return {
    at: performance.now(),
    inBytes: num(stats, 'total_net_input_bytes'),
    outBytes: num(stats, 'total_net_output_bytes'),
    commands: num(stats, 'total_commands_processed'),
    publishes: Number(/cmdstat_publish:calls=(\d+)/.exec(cmd)?.[1] ?? 0),
  };
}

function rates(a: RedisSample, b: RedisSample, subscribers: number): { cmds: number; pubs: number; deliveries: number; inBps: number; outBps: number } {
  const s = (b.at - a.at) / 1000;
  const pubs = (b.publishes - a.publishes) / s;
  return { cmds: (b.commands - a.commands) / s, pubs, deliveries: pubs * subscribers, inBps: (b.inBytes - a.inBytes) / s, outBps: (b.outBytes - a.outBytes) / s };
}

async function startNode(index: number, redis: RedisServer, cluster: string): Promise<Node> {
  const engine = await startEngine({
    cluster: { processes: 1, redis_url: redis.url, secret: SECRET, name: cluster, node_id: `n${index}`, advertise_host: '127.0.0.1', heartbeat_ms: HEARTBEAT_MS, lease_ms: LEASE_MS, ...(CHILD_ARGS === undefined ? {} : { child_node_args: CHILD_ARGS }) },
    logLevel: 'warn',
    readyTimeoutMs: 120_000,
    // One node may be both profiled and traced: its flags add up.
    nodeArgs: [
      ...(index === PROFILE_NODE ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : []),
      ...(index === TRACE_GC_NODE ? ['--trace-gc'] : []),
      ...(index === SNAPSHOT_NODE ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${PROFILE_DIR}`] : []),
      ...(GC_SPACES ? ['--trace-gc-verbose'] : []),
    ],
  });
  const primaryPid = engine.child.pid ?? 0;
  return { index, engine, primaryPid, childPid: childOf(primaryPid) };
}

/** Established TCP connections between engine children (forward links), counted per child. */
function forwardLinks(nodes: Node[]): number[] {
  let text: string;
  try {
    text = execFileSync('ss', ['-Htnp', 'state', 'established'], { encoding: 'utf8' });
  } catch {
    return nodes.map(() => Number.NaN);
  }
  const owner = new Map<string, number>();
  const rows: { local: string; peer: string; pid: number }[] = [];
  for (const line of text.split('\n')) {
    const parts = line.trim().split(/\s+/);
    const pid = Number(/pid=(\d+)/.exec(line)?.[1]);
    if (parts.length < 4 || !Number.isFinite(pid)) continue;
    const row = { local: parts[2] ?? '', peer: parts[3] ?? '', pid };
    owner.set(row.local, pid);
    rows.push(row);
  }
  const children = new Set(nodes.map((n) => n.childPid));
  return nodes.map((n) => rows.filter((r) => r.pid === n.childPid && children.has(owner.get(r.peer) ?? -1) && owner.get(r.peer) !== n.childPid).length);
}

/** CPU ms of each node (primary + child), keyed by its pids: a node restarted since counts as unknown. */
function cpuOf(nodes: Node[]): { pids: string; ms: number }[] {
  return nodes.map((n) => ({ pids: `${n.primaryPid}/${n.childPid}`, ms: cpuMs(n.primaryPid) + cpuMs(n.childPid) }));
}

function cpuRate(before: { pids: string; ms: number }[], after: { pids: string; ms: number }[], seconds: number): number[] {
  return after.map((a, i) => (before[i]?.pids === a.pids ? (a.ms - (before[i]?.ms ?? 0)) / seconds : Number.NaN));
}

/** A worker holding `count` routes `/<prefix>/<i>`; serves them all. */
async function bulkWorker(url: string, prefix: string, count: number): Promise<RawWorker> {
  const worker = await RawWorker.connect(url);
  const fn = `${prefix}::fn`;
  worker.send({ type: 'registerfunction', id: fn });
  worker.serve(fn, () => ({ status_code: 200, body: { ok: true } }));
  for (let i = 0; i < count; i++) {
    worker.send({ type: 'registertrigger', id: `${prefix}-${i}`, trigger_type: 'http', function_id: fn, config: { api_path: `/${prefix}/${i}`, http_method: 'GET' } });
  }
  await worker.sync();
  return worker;
}

/** HTTP requests the sim sent to the nodes (probes' polling, checks), for the polling rate printed. */
let requestsSent = 0;

/** Requests in flight at once in the chaos run's servability check. */
const CHECK_CONCURRENCY = 32;

/** The route paths in a node's table (admin GET /routes), or none if it does not answer in 5 s. */
async function routePathsOf(adminUrl: string): Promise<Set<string>> {
  try {
    const res = await fetch(`${adminUrl}/routes`, { signal: AbortSignal.timeout(5000) });
    const view = (await res.json()) as { routes: { path: string }[] };
    return new Set(view.routes.map((route) => route.path));
  } catch {
    return new Set();
  }
}

async function status(url: string, timeoutMs = 5000): Promise<number> {
  requestsSent++;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

/**
 * When the sim's own subscriber to the bus channel first saw a message naming each probe's path (the
 * sender's delta): splits a probe's time into registration → on the channel, and channel → servable.
 */
const seenOnChannel = new Map<string, number>();
/** The probe paths being waited for: a later message naming one (its worker's departure) is not noted. */
const awaitingChannel = new Set<string>();

/** ms from registering `/probe/<k>` on node `at` until every node answers 200 on it, and until the channel carried it. */
async function probe(nodes: Node[], at: number, k: number, prefix: string): Promise<{ total: number; toChannel: number }> {
  const worker = await RawWorker.connect(nodes[at]!.engine.workerUrl);
  const fn = `${prefix}probe${k}::fn`;
  worker.send({ type: 'registerfunction', id: fn });
  worker.serve(fn, () => ({ status_code: 200, body: { ok: true } }));
  await worker.sync();
  const path = `/${prefix}probe/${k}`;
  awaitingChannel.add(path);
  const sentAt = performance.now();
  worker.send({ type: 'registertrigger', id: `${prefix}probe-${k}`, trigger_type: 'http', function_id: fn, config: { api_path: path, http_method: 'GET' } });
  const done = await Promise.all(
    nodes.map(async (n) => {
      const deadline = sentAt + 30_000;
      while (performance.now() < deadline) {
        if ((await status(`${n.engine.httpUrl}${path}`)) === 200) return performance.now();
        await sleep(5);
      }
      return Number.NaN;
    }),
  );
  worker.close().catch(() => undefined);
  const onChannel = seenOnChannel.get(path);
  seenOnChannel.delete(path);
  awaitingChannel.delete(path);
  return { total: Math.max(...done) - sentAt, toChannel: onChannel === undefined ? Number.NaN : onChannel - sentAt };
}

interface Churner {
  stop(): Promise<void>;
  reconnects(): number;
  /** Turns skipped because every slot was still reconnecting. */
  skipped(): number;
  /** Routes currently registered by connected churn workers. */
  live(): string[];
}

/**
 * `rate` reconnects per second over `slots` churn workers spread over the nodes. A reconnect starts
 * every 1/rate s on the next slot not already reconnecting, without waiting for the ones in flight: one
 * at a time, a reconnect's own time (close, connect, register, sync) capped the rate (6.6/s of 10 at N=32).
 */
function churn(nodes: () => Node[], rate: number, prefix: string): Churner {
  const slots = Math.max(8, nodes().length);
  const workers: (RawWorker | undefined)[] = new Array(slots).fill(undefined);
  const routes: string[][] = new Array(slots).fill([]);
  const busy = new Array<boolean>(slots).fill(false);
  const inFlight = new Set<Promise<void>>();
  let count = 0;
  let skipped = 0;
  let running = rate > 0;
  let turn = 0;
  const reconnect = async (slot: number): Promise<void> => {
    const current = nodes();
    const node = current[slot % current.length]!;
    await workers[slot]?.close().catch(() => undefined);
    workers[slot] = undefined;
    routes[slot] = [];
    try {
      const worker = await RawWorker.connect(node.engine.workerUrl);
      const fn = `${prefix}c${slot}::fn`;
      worker.send({ type: 'registerfunction', id: fn });
      worker.serve(fn, () => ({ status_code: 200, body: { ok: true } }));
      const paths: string[] = [];
      for (let i = 0; i < CHURN_ROUTES; i++) {
        const path = `/${prefix}c/${slot}/${i}`;
        worker.send({ type: 'registertrigger', id: `${prefix}c-${slot}-${i}`, trigger_type: 'http', function_id: fn, config: { api_path: path, http_method: 'GET' } });
        paths.push(path);
      }
      await worker.sync();
      workers[slot] = worker;
      routes[slot] = paths;
      count++;
      // A worker whose node is killed (chaos) is gone, and so are its routes: no longer live.
      void worker.closed.then(() => {
        if (workers[slot] !== worker) return;
        workers[slot] = undefined;
        routes[slot] = [];
      });
    } catch {
      // the node was killed (chaos): a later turn tries again
    }
  };
  const startedAt = performance.now();
  const loop = (async () => {
    for (let tick = 0; running; tick++) {
      // The next slot not reconnecting; none free means this turn is skipped (counted, printed).
      let slot = -1;
      for (let tries = 0; tries < slots && slot === -1; tries++) {
        const candidate = turn++ % slots;
        if (!busy[candidate]) slot = candidate;
      }
      if (slot === -1) skipped++;
      else {
        busy[slot] = true;
        const task = reconnect(slot).finally(() => {
          busy[slot] = false;
          inFlight.delete(task);
        });
        inFlight.add(task);
      }
      // On a schedule, not after a sleep: a late tick does not lower the rate.
      const wait = startedAt + ((tick + 1) * 1000) / rate - performance.now();
      if (wait > 0) await sleep(wait);
    }
  })();
  return {
    reconnects: () => count,
    skipped: () => skipped,
    live: () => routes.flat(),
    stop: async () => {
      running = false;
      await loop;
      await Promise.all([...inFlight]);
    },
  };
}


async function scenario(n: number, r: number, rate: number): Promise<void> {
  const redis = await startRedisServer();
  const info = new Redis(redis.url);
  const cluster = `sim${Math.random().toString(36).slice(2, 7)}`;
  const spy = new Redis(redis.url);
  await spy.subscribe(`${cluster}:bus`);
  spy.on('message', (_channel: string, text: string) => {
    const at = performance.now();
    for (const m of text.matchAll(/(\/[pq]probe\/\d+)(?!\d)/g)) if (awaitingChannel.has(m[1]!) && !seenOnChannel.has(m[1]!)) seenOnChannel.set(m[1]!, at);
  });
  const nodes: Node[] = [];
  const workers: RawWorker[] = [];
  let steadyStop: (() => Promise<{ ok: number; failed: number; slowest: number; failures: string[] }>) | undefined;
  try {
    for (let i = 0; i < n; i++) nodes.push(await startNode(i, redis, cluster));
    const perNode = Math.ceil(r / n);
    for (const node of nodes) workers.push(await bulkWorker(node.engine.workerUrl, `b${node.index}`, perNode));
    // Every bulk route on every node: the last route of each bulk worker answers everywhere.
    for (const node of nodes) {
      for (const other of nodes) {
        const deadline = Date.now() + 120_000;
        while ((await status(`${node.engine.httpUrl}/b${other.index}/${perNode - 1}`)) !== 200) {
          if (Date.now() > deadline) throw new Error(`node ${node.index} never served node ${other.index}'s routes`);
          await sleep(50);
        }
      }
    }
    await sleep(2000); // settle
    // The sim's own subscriber (spy) is not counted.
    const subscribers = Number((await info.pubsub('NUMSUB', `${cluster}:bus`))[1] ?? n + 1) - 1;

    // Idle.
    const idleCpu0 = cpuOf(nodes);
    const idleCpuChild0 = nodes.map((nd) => cpuMs(nd.childPid));
    const idleR0 = await redisSample(info);
    await sleep(IDLE_SECONDS * 1000);
    const idleR1 = await redisSample(info);
    const idleCpu1 = cpuOf(nodes);
    const idleCpuChild1 = nodes.map((nd) => cpuMs(nd.childPid));
    const idleSec = (idleR1.at - idleR0.at) / 1000;
    const idle = rates(idleR0, idleR1, subscribers);
    const idleCpu = cpuRate(idleCpu0, idleCpu1, idleSec);
    const idleChild = idleCpuChild1.map((ms, i) => (ms - (idleCpuChild0[i] ?? 0)) / idleSec);
    const idleRss = nodes.map((nd) => rssMb(nd.childPid));

    // Registrations, one at a time, while otherwise idle: latency and Redis egress per registration.
    const latencies: number[] = [];
    const toChannel: number[] = [];
    const p0 = await redisSample(info);
    for (let k = 0; k < PROBES; k++) {
      const t = await probe(nodes, k % n, k, 'p');
      latencies.push(t.total);
      toChannel.push(t.toChannel);
    }
    const p1 = await redisSample(info);
    const probeSec = (p1.at - p0.at) / 1000;
    const egressPerReg = (p1.outBytes - p0.outBytes - idle.outBps * probeSec) / PROBES;
    const ingressPerReg = (p1.inBytes - p0.inBytes - idle.inBps * probeSec) / PROBES;

    // Churn (and chaos).
    const live = (): Node[] => nodes;
    if (CHAOS) {
      const steady = await bulkWorker(nodes[0]!.engine.workerUrl, 'steady', 1);
      workers.push(steady);
      // Served throughout means from when node 1 serves it: the loop starts once it does.
      const servedBy = Date.now() + 10_000;
      while ((await status(`${nodes[1]!.engine.httpUrl}/steady/0`)) !== 200) {
        if (Date.now() > servedBy) throw new Error('node 1 never served the steady route');
        await sleep(20);
      }
      let running = true;
      let ok = 0;
      let failed = 0;
      let slowest = 0;
      const failures: string[] = [];
      const runStart = performance.now();
      const loop = (async () => {
        while (running) {
          const started = performance.now();
          const code = await status(`${nodes[1]!.engine.httpUrl}/steady/0`, 10_000);
          slowest = Math.max(slowest, performance.now() - started);
          if (code === 200) ok++;
          else {
            failed++;
            // What a failure was (0: no answer within 10 s or a connection error), and when in the run.
            failures.push(`${code}@${((performance.now() - runStart) / 1000).toFixed(1)}s`);
          }
          await sleep(20);
        }
      })();
      steadyStop = async () => {
        running = false;
        await loop;
        return { ok, failed, slowest, failures };
      };
    }
    const churner = churn(live, rate, 'x');
    let k = PROBES;
    // Warm-up: the same churn and probes, nothing of it counted but its own RSS curve.
    const warmSeries = nodes.map(() => [] as RssSeries);
    if (WARMUP_SECONDS > 0) {
      const w0 = performance.now();
      const sampleWarm = (): void => {
        const min = (performance.now() - w0) / 60_000;
        nodes.forEach((nd, i) => warmSeries[i]!.push({ min, mb: rssMb(nd.childPid), pid: nd.childPid }));
      };
      sampleWarm();
      const warmTimer = setInterval(sampleWarm, RSS_EVERY_MS);
      const warmEnd = Date.now() + WARMUP_SECONDS * 1000;
      while (Date.now() < warmEnd) {
        await probe(nodes, k % n, k, 'q');
        k++;
        await sleep(200);
      }
      clearInterval(warmTimer);
      sampleWarm();
    }
    const reconnects0 = churner.reconnects();
    const skipped0 = churner.skipped();
    const cpu0 = cpuOf(nodes);
    const c0 = await redisSample(info);
    const churnLatencies: number[] = [];
    const churnToChannel: number[] = [];
    const simCpu0 = process.cpuUsage();
    const requests0 = requestsSent;
    // Each node's child RSS every RSS_EVERY_MS under churn (pids kept: a restarted node starts a new series).
    const rssSeries = nodes.map(() => [] as RssSeries);
    const sampleRss = (): void => {
      const min = (performance.now() - c0.at) / 60_000;
      nodes.forEach((nd, i) => rssSeries[i]!.push({ min, mb: rssMb(nd.childPid), pid: nd.childPid, ...(SMAPS ? { maps: rssByMapping(nd.childPid) } : {}) }));
    };
    sampleRss();
    const tracedNode = nodes.find((nd) => nd.index === TRACE_GC_NODE);
    const rssParts0 = tracedNode === undefined ? [] : rssParts(tracedNode.childPid);
    // Where the measured window starts in the traced child's life (its GC trace counts from its start).
    const windowFromMin = tracedNode === undefined ? 0 : ageMin(tracedNode.childPid);
    const rssTimer = setInterval(sampleRss, RSS_EVERY_MS);
    // Each child's measured window in its own life's minutes (the GC trace's clock).
    const spaceWindows = GC_SPACES ? nodes.map((nd) => ({ pid: nd.childPid, from: ageMin(nd.childPid), to: Number.NaN })) : [];
    const snapshotNode = nodes.find((nd) => nd.index === SNAPSHOT_NODE);
    if (snapshotNode !== undefined) {
      mkdirSync(PROFILE_DIR, { recursive: true });
      process.kill(snapshotNode.childPid, 'SIGUSR2');
      console.log(`node ${SNAPSHOT_NODE}: heap snapshot of child ${snapshotNode.childPid} asked at the window's start (into ${PROFILE_DIR})`);
    }
    const end = Date.now() + SECONDS * 1000;
    let kills = 0;
    while (Date.now() < end) {
      if (CHAOS && n > 2) {
        const victim = 2 + (kills % (n - 2));
        const old = nodes[victim]!;
        await old.engine.killAll();
        kills++;
        const restarted = await startNode(victim, redis, cluster);
        nodes[victim] = restarted;
        workers.push(await bulkWorker(restarted.engine.workerUrl, `k${kills}`, Math.min(perNode, 50)));
      }
      const t = await probe(nodes, k % n, k, 'q');
      churnLatencies.push(t.total);
      churnToChannel.push(t.toChannel);
      k++;
      await sleep(CHAOS ? 500 : 200);
    }
    const c1 = await redisSample(info);
    const cpu1 = cpuOf(nodes);
    const simCpu = process.cpuUsage(simCpu0);
    const requests1 = requestsSent;
    const reconnected = churner.reconnects() - reconnects0;
    const skippedInWindow = churner.skipped() - skipped0;
    clearInterval(rssTimer);
    sampleRss();
    nodes.forEach((nd, i) => {
      const w = spaceWindows[i];
      if (w !== undefined && w.pid === nd.childPid) w.to = ageMin(nd.childPid);
    });
    if (snapshotNode !== undefined && nodes.includes(snapshotNode)) {
      process.kill(snapshotNode.childPid, 'SIGUSR2');
      console.log(`node ${SNAPSHOT_NODE}: heap snapshot of child ${snapshotNode.childPid} asked at the window's end`);
      await snapshotsWritten(snapshotNode.childPid, 2);
    }
    await churner.stop();
    const churnSec = (c1.at - c0.at) / 1000;
    const busy = rates(c0, c1, subscribers);
    const busyCpu = cpuRate(cpu0, cpu1, churnSec);
    const busyRss = nodes.map((nd) => rssMb(nd.childPid));
    const links = forwardLinks(nodes);

    const kb = (b: number): string => (b / 1024).toFixed(1);
    console.log(`\n## N=${n} R=${r} churn=${rate}/s${CHAOS ? ' chaos' : ''}  (load average ${loadavg().map((l) => l.toFixed(2)).join(' ')})`);
    console.log(`registration → servable on every node, idle:  p50 ${pct(latencies, 50).toFixed(0)} ms  p99 ${pct(latencies, 99).toFixed(0)} ms  (${latencies.length} probes)`);
    console.log(`registration → servable on every node, churn: p50 ${pct(churnLatencies, 50).toFixed(0)} ms  p99 ${pct(churnLatencies, 99).toFixed(0)} ms  (${churnLatencies.length} probes)`);
    const split = (total: number[], channel: number[]): string => {
      const rest = total.map((t, i) => t - (channel[i] ?? Number.NaN)).filter(Number.isFinite);
      const ch = channel.filter(Number.isFinite);
      return `registration → on the channel p50 ${pct(ch, 50).toFixed(0)} p99 ${pct(ch, 99).toFixed(0)} ms; channel → servable everywhere p50 ${pct(rest, 50).toFixed(0)} p99 ${pct(rest, 99).toFixed(0)} ms`;
    };
    console.log(`  of which, idle:  ${split(latencies, toChannel)}`);
    console.log(`  of which, churn: ${split(churnLatencies, churnToChannel)}`);
    console.log(`the sim's own process (workers, probes' HTTP polling, spy) under churn: ${((simCpu.user + simCpu.system) / 1000 / churnSec).toFixed(0)} ms/s of CPU; HTTP requests to the nodes ${((requests1 - requests0) / churnSec).toFixed(0)}/s (${((requests1 - requests0) / churnSec / n).toFixed(0)}/s per node)`);
    console.log(`redis per registration (idle subtracted): egress ${kb(egressPerReg)} KiB  ingress ${kb(ingressPerReg)} KiB`);
    console.log(`redis idle:  ${idle.cmds.toFixed(0)} cmd/s  ${idle.pubs.toFixed(1)} publish/s  ${idle.deliveries.toFixed(0)} deliveries/s  in ${kb(idle.inBps)} KiB/s  out ${kb(idle.outBps)} KiB/s`);
    console.log(`redis churn: ${busy.cmds.toFixed(0)} cmd/s  ${busy.pubs.toFixed(1)} publish/s  ${busy.deliveries.toFixed(0)} deliveries/s  in ${kb(busy.inBps)} KiB/s  out ${kb(busy.outBps)} KiB/s  (${reconnected} reconnects in ${churnSec.toFixed(1)} s: ${(reconnected / churnSec).toFixed(1)}/s of ${rate}/s asked, ${skippedInWindow} turns skipped with every slot busy)`);
    console.log(`node CPU ms/s idle:  ${fmt(idleCpu)}  (${idleSec.toFixed(0)} s)`);
    console.log(`  of which the child: ${fmt(idleChild)}`);
    console.log(`node CPU ms/s churn: ${fmt(busyCpu)}`);
    console.log(`child RSS MB idle:  ${fmt(idleRss)}`);
    console.log(`child RSS MB churn: ${fmt(busyRss)}`);
    console.log(`forward connections per child: ${fmt(links)}`);
    // RSS under churn: the warm-up's curve apart, then the measured window's.
    const pids = nodes.map((nd) => nd.childPid);
    if (WARMUP_SECONDS > 0) printRss(`warm-up (${WARMUP_SECONDS} s, not measured): `, warmSeries, pids, RSS_EVERY_MS);
    printRss(WARMUP_SECONDS > 0 ? 'measured window: ' : '', rssSeries, pids, RSS_EVERY_MS);
    if (SMAPS) printMappings(WARMUP_SECONDS > 0 ? 'measured window: ' : '', rssSeries, pids);
    if (GC_SPACES) {
      const series = nodes.map((nd) => spacesSeries(nd.engine.stdout.lines, nd.childPid));
      printSpaces(WARMUP_SECONDS > 0 ? 'measured window: ' : '', series, spaceWindows);
    }
    const traced = nodes.find((nd) => nd.index === TRACE_GC_NODE);
    if (traced !== undefined) {
      // The child's raw trace, for what this summary leaves out (scavenges: the allocation rate).
      const childLines = traced.engine.stdout.lines.filter((line) => line.startsWith(`[${traced.childPid}:`));
      const gcLog = resolve(`.bench-results/sim-scale-gc-n${TRACE_GC_NODE}-N${n}-R${r}.log`);
      mkdirSync(dirname(gcLog), { recursive: true });
      writeFileSync(gcLog, `${childLines.join('\n')}\n`);
      console.log(`node ${TRACE_GC_NODE} child's --trace-gc lines: ${gcLog}`);
      // `[pid:0x…]  123456 ms: Mark-Compact 45.2 (60.1) -> 40.3 (61.2) MB, …` of the child (ms since it started).
      const fulls = childLines
        .map((line) => /\s(\d+) ms: Mark-Compact(?: \(reduce\))? [\d.]+ \([\d.]+\) -> ([\d.]+) \(([\d.]+)\) MB/.exec(line))
        .filter((m): m is RegExpExecArray => m !== null)
        .map((m) => ({ min: Number(m[1]) / 60_000, mb: Number(m[2]), committed: Number(m[3]) }));
      const last = fulls.slice(-Math.max(1, Math.floor(fulls.length / 2)));
      console.log(
        `node ${TRACE_GC_NODE} child heap after each full GC, MB (${fulls.length} over its life): first ${fmt(fulls.slice(0, 5).map((f) => f.mb), 1)} … last ${fmt(fulls.slice(-5).map((f) => f.mb), 1)}; slope ${slope(fulls).toFixed(2)} MB/min over its life, ${slope(last).toFixed(2)} MB/min over the later half`,
      );
      // The live heap over the measured window alone (and its second half), with each full GC's value.
      const inWindow = fulls.filter((f) => f.min >= windowFromMin);
      const windowHalf = inWindow.filter((f) => f.min >= windowFromMin + (SECONDS / 60) / 2);
      console.log(
        `node ${TRACE_GC_NODE} child heap after each full GC in the measured window, MB (${inWindow.length}): ${fmt(inWindow.map((f) => f.mb), 1)}; slope ${slope(inWindow).toFixed(2)} MB/min over the window, ${slope(windowHalf).toFixed(2)} MB/min over its second half`,
      );
      // The heap V8 keeps committed after those GCs (the parenthesised size): what of the RSS is the JS heap's.
      console.log(`node ${TRACE_GC_NODE} child committed heap after each full GC, MB: first ${fmt(fulls.slice(0, 5).map((f) => f.committed), 1)} … last ${fmt(fulls.slice(-5).map((f) => f.committed), 1)}; ${fmt(rssParts0)} → ${fmt(rssParts(traced.childPid))} MB (RssAnon/RssFile) from the start of churn to its end`);
    }

    if (CHAOS) {
      // Every route registered at the end (live churn workers) servable on every node within 2 s.
      // Polled with a bounded number of requests in flight (CHECK_CONCURRENCY): firing every pair at
      // once (1,200 at N = 16) made the check measure its own overload on a slow host — pairs on
      // nodes never killed timed out unanswered, on the code of a run where the same check had
      // passed. Each pair is polled until it answers 200 or 2 s have passed since the last change. A
      // pair the client could first ask only after those 2 s (its own backlog) is asked once, and
      // counts as served in time only if it answers 200 and its node's route table, read at the 2 s
      // mark (admin GET /routes), already held the route.
      const lastChange = performance.now();
      const paths = churner.live();
      const pairs = nodes.flatMap((node) => paths.map((path) => ({ node, path })));
      const tablesAt2s = (async () => {
        await sleep(Math.max(0, 2000 - (performance.now() - lastChange)));
        return Promise.all(nodes.map((node) => routePathsOf(node.engine.adminUrl)));
      })();
      const unserved: string[] = [];
      const late: { index: number; path: string }[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: Math.min(CHECK_CONCURRENCY, pairs.length) }, async () => {
          while (next < pairs.length) {
            const { node, path } = pairs[next++]!;
            const askedLate = performance.now() - lastChange >= 2000;
            let last: number;
            do {
              last = await status(`${node.engine.httpUrl}${path}`, 2000);
              if (last === 200) break;
              await sleep(20);
            } while (performance.now() - lastChange < 2000);
            if (last !== 200) unserved.push(`n${node.index}${path}:${last}`);
            else if (askedLate) late.push({ index: node.index, path });
          }
        }),
      );
      const tables = await tablesAt2s;
      const lateNotInTable = late.filter(({ index, path }) => !tables[index]?.has(path));
      for (const { index, path } of lateNotInTable) unserved.push(`n${index}${path}:not in the table at 2 s`);
      const missing = unserved.length;
      const steadyResult = await steadyStop!();
      steadyStop = undefined;
      console.log(`chaos: ${kills} node kills; ${paths.length} live churn routes × ${n} nodes, ${missing} not servable within 2 s of the last change (${late.length} pairs first asked after the 2 s, the client's own backlog: answered 200, and ${late.length - lateNotInTable.length} of them in their node's table at 2 s)${missing === 0 ? '' : ` (node, route: last status; first 10: ${unserved.slice(0, 10).join(', ')})`}`);
      console.log(`chaos: steady route via node 1 → node 0: ${steadyResult.ok} ok, ${steadyResult.failed} failed, slowest ${steadyResult.slowest.toFixed(0)} ms${steadyResult.failures.length === 0 ? '' : ` (failures: ${steadyResult.failures.join(', ')})`}`);
    }
  } finally {
    await steadyStop?.();
    for (const w of workers) await w.close().catch(() => undefined);
    // A profiled node stops gracefully first: --cpu-prof writes its profile on a normal exit only.
    const profiled = nodes.find((nd) => nd.index === PROFILE_NODE);
    if (profiled !== undefined) {
      await profiled.engine.stop('SIGTERM').catch(() => undefined);
      console.log(`profiles of node ${PROFILE_NODE} in ${PROFILE_DIR}`);
    }
    await Promise.all(nodes.map((nd) => nd.engine.killAll().catch(() => undefined)));
    info.disconnect();
    spy.disconnect();
    await redis.stop();
  }
}

console.log(`# sim:scale nodes=${NODES.join(',')} routes=${ROUTES.join(',')} churn=${CHURN.join(',')}/s seconds=${SECONDS}${WARMUP_SECONDS > 0 ? ` warmup=${WARMUP_SECONDS} s` : ''} heartbeat=${HEARTBEAT_MS} ms lease=${LEASE_MS} ms${CHAOS ? ' --chaos' : ''}`);
for (const n of NODES) for (const r of ROUTES) for (const rate of CHURN) await scenario(n, r, rate);
process.exit(0);
