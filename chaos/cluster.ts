/**
 * The cluster under test: its own redis-server, two engine nodes in Redis mode (two children each),
 * and replicated iii-sdk workers, all real processes on loopback. Also the admin views the harness
 * reads to decide whether the cluster has converged.
 */
import { join } from 'node:path';
import { request } from 'undici';
import type { EngineHandle, ManagedProcess } from '../test/support/processes.js';
import { childPids, isRunning } from '../test/support/proc.js';
import { ROOT, spawnManaged, startEngine, stopProcess } from '../test/support/processes.js';
import type { RedisServer } from '../test/support/redis.js';
import { startRedisServer } from '../test/support/redis.js';

export const FUNCTION_ID = 'chaos::echo';
export const ROUTE = { method: 'POST', path: '/chaos/echo' } as const;
const WORKER_SCRIPT = join(ROOT, 'chaos', 'worker.mjs');
const ADMIN_TIMEOUT_MS = 2000;
/** A worker process loading Node and the SDK on a busy 2-core machine. */
const WORKER_START_LIMIT_MS = 20_000;

export interface ClusterSettings {
  nodes: number;
  childrenPerNode: number;
  replicasPerNode: number;
  /** RestApiModule default_timeout: the request deadline. */
  requestTimeoutMs: number;
  /** ClusterModule heartbeat_ms and lease_ms: a killed child's peer leaves the table when its lease expires. */
  heartbeatMs: number;
  leaseMs: number;
  /** WorkerModule heartbeat_interval_ms and heartbeat_timeout_ms: a stopped worker is dropped after the timeout. */
  workerHeartbeatIntervalMs: number;
  workerHeartbeatTimeoutMs: number;
  logLevel: string;
}

export interface Node {
  name: string;
  engine: EngineHandle;
}

/** One replica slot: a name and the node it connects to; the process changes when it is restarted. */
export class Replica {
  process: ManagedProcess | undefined;
  stopped = false;

  constructor(
    readonly name: string,
    readonly node: Node,
  ) {}

  get pid(): number | undefined {
    return this.process?.child.pid;
  }

  get alive(): boolean {
    const child = this.process?.child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  /**
   * Starts the replica's process; resolves once it has loaded the SDK and handed over its
   * registrations (its start-up line), so what follows measures the engine, not Node's boot.
   */
  async start(): Promise<void> {
    const p = spawnManaged(process.execPath, [WORKER_SCRIPT], {
      ...process.env,
      OTEL_ENABLED: 'false',
      III_URL: this.node.engine.workerUrl,
      CHAOS_REPLICA: this.name,
    });
    this.process = p;
    this.stopped = false;
    await p.stdout.waitFor((line) => line.includes('chaos replica started'), WORKER_START_LIMIT_MS, `replica ${this.name} to start`);
  }

  signal(signal: NodeJS.Signals): void {
    const pid = this.pid;
    if (pid !== undefined && this.alive) process.kill(pid, signal);
  }

  async kill(): Promise<void> {
    const p = this.process;
    if (p === undefined || !this.alive) return;
    p.child.kill('SIGKILL');
    await p.exited;
    this.stopped = false;
  }

  async stop(): Promise<void> {
    if (this.process === undefined) return;
    if (this.stopped) this.signal('SIGCONT');
    await stopProcess(this.process, 'SIGTERM', 3000);
  }
}

export interface ChaosCluster {
  redis: RedisServer;
  nodes: Node[];
  replicas: Replica[];
  close(): Promise<void>;
}

export async function startCluster(settings: ClusterSettings): Promise<ChaosCluster> {
  const redis = await startRedisServer();
  const nodes: Node[] = [];
  const replicas: Replica[] = [];
  const close = async (): Promise<void> => {
    await Promise.allSettled(replicas.map((r) => r.stop()));
    await Promise.allSettled(nodes.map((n) => n.engine.stop()));
    await redis.stop().catch(() => undefined);
  };
  try {
    const clusterName = `chaos${Math.random().toString(36).slice(2, 8)}`;
    for (let i = 0; i < settings.nodes; i++) {
      const name = String.fromCharCode(97 + i);
      const engine = await startEngine({
        api: { default_timeout: settings.requestTimeoutMs },
        workers: { heartbeat_interval_ms: settings.workerHeartbeatIntervalMs, heartbeat_timeout_ms: settings.workerHeartbeatTimeoutMs },
        cluster: {
          processes: settings.childrenPerNode,
          redis_url: redis.url,
          secret: 'chaos-secret',
          name: clusterName,
          node_id: `node-${name}`,
          advertise_host: '127.0.0.1',
          forward_port: 0,
          heartbeat_ms: settings.heartbeatMs,
          lease_ms: settings.leaseMs,
        },
        logLevel: settings.logLevel,
      });
      nodes.push({ name, engine });
    }
    for (const node of nodes) {
      for (let r = 0; r < settings.replicasPerNode; r++) replicas.push(new Replica(`${node.name}${r}`, node));
    }
    await Promise.all(replicas.map((r) => r.start()));
    return { redis, nodes, replicas, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * Waits until a signalled process is really gone: on a busy machine a SIGKILLed process can take a
 * while to be scheduled and die, and until then every view still looks consistent.
 */
export async function awaitGone(pid: number, limitMs = 5000): Promise<void> {
  const deadline = performance.now() + limitMs;
  while (isRunning(pid)) {
    if (performance.now() > deadline) throw new Error(`pid ${pid} still running ${limitMs} ms after SIGKILL`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function adminGet(node: Node, path: string): Promise<{ status: number; body: unknown }> {
  const res = await request(`${node.engine.adminUrl}${path}`, {
    headersTimeout: ADMIN_TIMEOUT_MS + 500,
    bodyTimeout: ADMIN_TIMEOUT_MS + 500,
  });
  const text = await res.body.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.statusCode, body };
}

interface ReadyChild {
  index: number;
  pid?: number;
  peerId?: string;
  ready?: boolean;
  /** Its view of the cluster is in sync (false while Redis is down; readiness stays 200 then). */
  busSynced?: boolean;
}

/** The child at `index` as /readyz lists it, checked against the primary's children in /proc. */
export async function childPidAt(node: Node, index: number): Promise<number | undefined> {
  const primaryPid = node.engine.child.pid;
  if (primaryPid === undefined) return undefined;
  const children = childPids(primaryPid);
  try {
    const { body } = await adminGet(node, '/readyz');
    const listed = (body as { children?: ReadyChild[] }).children?.find((c) => c.index === index)?.pid;
    if (listed !== undefined && children.includes(listed)) return listed;
  } catch {
    // fall back to the process table alone
  }
  return children[index % Math.max(children.length, 1)];
}

interface WorkerEntry {
  name?: string;
  pid?: number;
  peer?: string;
  node?: string;
  functions?: string[];
}

interface RouteEntry {
  method?: string;
  path?: string;
  function_id?: string;
  owners?: string[];
}

export interface ExpectedReplica {
  name: string;
  pid: number;
  nodeId: string;
}

/**
 * The peers (engine children) alive on a node: /readyz is 200 and lists `processes` ready children in sync,
 * each of them a live child of the node's primary in /proc. A child that was just killed fails this
 * until the primary has respawned it and the new child is ready. Returns a problem or the peer ids.
 */
export async function livePeers(node: Node, processes: number): Promise<string | string[]> {
  const primaryPid = node.engine.child.pid;
  const ready = await adminGet(node, '/readyz');
  if (ready.status !== 200) return `node ${node.name}: /readyz ${ready.status}`;
  const children = (ready.body as { children?: ReadyChild[] }).children ?? [];
  const running = primaryPid === undefined ? [] : childPids(primaryPid);
  if (children.length !== processes) return `node ${node.name}: ${children.length} children in /readyz, expected ${processes}`;
  const peers: string[] = [];
  for (const child of children) {
    if (child.pid === undefined || !running.includes(child.pid)) return `node ${node.name}: child ${child.index} (pid ${child.pid ?? '?'}) is not running`;
    if (child.ready !== true || child.peerId === undefined) return `node ${node.name}: child ${child.index} not ready`;
    if (child.busSynced === false) return `node ${node.name}: child ${child.index} bus not in sync`;
    peers.push(child.peerId);
  }
  return peers;
}

/**
 * Whether one node's view is what the harness expects: every live replica listed exactly once (by
 * worker name and pid, on its own node, connected to a live peer, serving the function), no other
 * chaos worker, and the route's owners exactly the peers those workers are connected to. Returns the
 * first problem, or undefined when consistent.
 */
export async function viewProblem(node: Node, expected: readonly ExpectedReplica[], live: ReadonlySet<string>): Promise<string | undefined> {
  const workers = await adminGet(node, '/workers');
  if (workers.status !== 200 || !Array.isArray(workers.body)) return `node ${node.name}: /workers ${workers.status}`;
  const chaosWorkers = (workers.body as WorkerEntry[]).filter((w) => w.name?.startsWith('chaos-') === true);
  const peers = new Set<string>();
  for (const want of expected) {
    const matches = chaosWorkers.filter((w) => w.name === `chaos-${want.name}`);
    if (matches.length !== 1) return `node ${node.name}: replica ${want.name} listed ${matches.length} times`;
    const entry = matches[0] as WorkerEntry;
    if (entry.pid !== undefined && entry.pid !== want.pid) return `node ${node.name}: replica ${want.name} listed with pid ${entry.pid}, expected ${want.pid}`;
    if (entry.peer === undefined || !live.has(entry.peer)) return `node ${node.name}: replica ${want.name} listed on peer ${entry.peer ?? '?'}, which is not a live child`;
    if (entry.node !== want.nodeId) return `node ${node.name}: replica ${want.name} on ${entry.node ?? '?'}, expected ${want.nodeId}`;
    if (!(entry.functions ?? []).includes(FUNCTION_ID)) return `node ${node.name}: replica ${want.name} does not serve ${FUNCTION_ID}`;
    peers.add(entry.peer);
  }
  if (chaosWorkers.length !== expected.length) {
    return `node ${node.name}: ${chaosWorkers.length} chaos workers listed, expected ${expected.length}`;
  }
  const routes = await adminGet(node, '/routes');
  if (routes.status !== 200) return `node ${node.name}: /routes ${routes.status}`;
  const route = ((routes.body as { routes?: RouteEntry[] }).routes ?? []).find(
    (r) => r.method === ROUTE.method && r.path === ROUTE.path && r.function_id === FUNCTION_ID,
  );
  if (route === undefined) return `node ${node.name}: route ${ROUTE.method} ${ROUTE.path} missing`;
  const owners = [...(route.owners ?? [])].sort();
  const wanted = [...peers].sort();
  if (owners.join(',') !== wanted.join(',')) return `node ${node.name}: route owners [${owners.join(', ')}], expected [${wanted.join(', ')}]`;
  return undefined;
}

/** The first problem across every node (liveness first, then each node's view), or undefined. */
export async function clusterProblem(nodes: readonly Node[], processes: number, expected: readonly ExpectedReplica[]): Promise<string | undefined> {
  const live = new Set<string>();
  for (const node of nodes) {
    const peers = await livePeers(node, processes);
    if (typeof peers === 'string') return peers;
    for (const peer of peers) live.add(peer);
  }
  for (const node of nodes) {
    const problem = await viewProblem(node, expected, live);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/**
 * Polls every node's view every `pollMs` until all are consistent or `limitMs` passes. Resolves with
 * the time it took, or null and the last problem seen.
 */
export async function awaitConvergence(
  nodes: readonly Node[],
  processes: number,
  expected: () => ExpectedReplica[],
  limitMs: number,
  pollMs = 100,
): Promise<{ ms: number | null; lastProblem?: string; trail: { ms: number; problem: string }[] }> {
  const started = performance.now();
  let lastProblem: string | undefined;
  // Each problem in the order it was first seen: what the cluster was waiting for, and for how long.
  const trail: { ms: number; problem: string }[] = [];
  for (;;) {
    try {
      lastProblem = await clusterProblem(nodes, processes, expected());
    } catch (err) {
      lastProblem = `admin query failed: ${(err as Error).message}`;
    }
    const elapsed = performance.now() - started;
    if (lastProblem === undefined) return { ms: Math.round(elapsed), trail };
    if (trail.at(-1)?.problem !== lastProblem) trail.push({ ms: Math.round(elapsed), problem: lastProblem });
    if (elapsed >= limitMs) return { ms: null, lastProblem, trail };
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
