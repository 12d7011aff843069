import { randomBytes } from 'node:crypto';
import cluster from 'node:cluster';
import type { Worker as ClusterWorker } from 'node:cluster';
import type { Logger } from 'pino';
import type { EngineConfig } from '../config/types.js';
import type { EnginePorts } from '../engine.js';
import { AdminServer } from '../observability/admin-server.js';
import { ClusterMetrics } from '../observability/cluster-metrics.js';
import type { ChildBootstrap, ChildStatusMessage } from './child-messages.js';
import type { AdminQueryMessage } from './child-messages.js';
import { CHILD_BOOTSTRAP_ENV, isAdminAnswer, isChildFatal, isChildStatus } from './child-messages.js';
import type { IpcChannel } from '../bus/ipc-channel.js';
import { IpcRelay } from '../bus/ipc-relay.js';
import { primaryMemoryBound } from '../workers/memory-bound.js';
import { FreshnessHost } from '../cluster/freshness.js';
import { TraceOwnerHost } from '../cluster/trace-owner-questions.js';
import { ChannelLivenessHost } from '../cluster/channel-liveness.js';
import { defaultNodeId } from '../cluster/peer-id.js';
import type { BusState } from './node-health.js';
import { busState, nodeReady } from './node-health.js';
import { moduleStoreSpecs } from '../modules/module-host.js';
import { KvHost } from './kv-host.js';
import { readySummary } from './ready-line.js';
import { embeddedQueueHost } from '../modules/queue/embedded-queue-host.js';
import type { EmbeddedQueueHost } from '../modules/queue/embedded-queue-host.js';

/**
 * glibc's malloc arenas for each engine process, unless the engine's own environment sets
 * MALLOC_ARENA_MAX (0 gives glibc's default, 8 per core). With one arena per thread, the memory V8's
 * background threads malloc and free moved a child's RSS by about 2 MB either way within minutes in
 * the 32-node simulation; with one arena for all it stayed flat, at no cost in CPU (docs/operations.md#memory).
 */
const CHILD_MALLOC_ARENA_MAX = '1';

const RESTART_BASE_MS = 100;
const RESTART_MAX_MS = 5000;
/** A child that lived this long is healthy again: its next crash restarts at the base delay. */
const STABLE_AFTER_MS = 10_000;
/** Children get the drain grace plus this before they are killed. */
const SHUTDOWN_SLACK_MS = 5000;
/** An admin view waits at most this long for a child's answer. */
const ADMIN_QUERY_TIMEOUT_MS = 2000;

interface Slot {
  index: number;
  worker: ClusterWorker | undefined;
  channel: IpcChannel | undefined;
  status: ChildStatusMessage | undefined;
  startedAt: number;
  crashes: number;
  restartTimer: NodeJS.Timeout | undefined;
}

function channelOf(worker: ClusterWorker): IpcChannel {
  return {
    send: (message) => {
      if (worker.isConnected()) worker.send(message as never);
    },
    onMessage: (listener) => {
      worker.on('message', listener);
      return () => worker.off('message', listener);
    },
  };
}

export interface PrimaryOptions {
  config: EngineConfig;
  logger: Logger;
  configSource: string;
  drainGraceMs: number;
  /** The Node.js flags of this process: children get them too, then cluster.child_node_args. */
  execArgv: readonly string[];
  /** MALLOC_ARENA_MAX of this process's environment, if set: the children get it in place of the default. */
  mallocArenaMax?: string;
  /** A child could not start before the cluster was ever ready: the process should exit 1. */
  onFatal: (code: string, message: string) => void;
  /** This process's id, for the metric series kept apart per process (`switchyard_memory_bound_bytes{pid}`); 0 when unset. */
  pid?: number;
}

/**
 * The primary process (docs/cluster.md#processes): forks the children, restarts a crashed one with
 * backoff, relays the embedded bus, serves admin, and drains everything on shutdown. It serves no
 * user traffic itself.
 */
export class Primary {
  private readonly slots: Slot[] = [];
  private readonly relay: IpcRelay;
  /** Answers a child's freshness barrier by asking its siblings (src/cluster/freshness.ts). */
  private readonly freshness = new FreshnessHost();
  /** Answers a child's question about a trace (whose worker its log record is) by asking its siblings. */
  private readonly traceOwners = new TraceOwnerHost();
  /** Answers a child's heartbeat question about a worker's channel traffic by asking its siblings (src/cluster/channel-liveness.ts). */
  private readonly channelLiveness = new ChannelLivenessHost();
  /** Embedded mode: the one copy of the modules' kv stores, and the cluster's leases (docs/modules.md). */
  private readonly kvHost: KvHost | undefined;
  /** Embedded mode with iii-queue: the one copy of the queue's messages (docs/queue.md#embedded). */
  private readonly queueHost: EmbeddedQueueHost | undefined;
  private readonly admin: AdminServer;
  private readonly bootstrap: Omit<ChildBootstrap, 'index'>;
  private shuttingDown = false;
  private announced = false;
  private lastBusState: BusState = 'in_sync';
  private adminPort: number | undefined;
  /** Its own memory bound: the snapshots its relay holds to replay to a restarted child (memory-bound.ts). */
  private readonly metrics: ClusterMetrics;
  private nextQueryId = 1;
  private readonly queries = new Map<number, { resolve: (data: unknown) => void; timer: NodeJS.Timeout }>();

  constructor(private readonly options: PrimaryOptions) {
    const { config, logger } = options;
    this.relay = new IpcRelay(config.cluster.name, logger.child({ module: 'relay' }));
    this.metrics = new ClusterMetrics({ pid: options.pid ?? 0, bytes: () => primaryMemoryBound(config.workers, this.relay.peerCount).bytes });
    if (config.cluster.redisUrl === undefined && Object.keys(config.modules).length > 0) {
      this.kvHost = new KvHost(moduleStoreSpecs(config), logger.child({ module: 'kv' }));
    }
    this.queueHost = embeddedQueueHost(config, logger.child({ module: 'queue' }));
    this.bootstrap = {
      config,
      nodeId: config.cluster.nodeId ?? defaultNodeId(),
      // Embedded mode without a configured secret: a fresh one per primary, shared by its children only.
      secret: config.cluster.secret ?? randomBytes(32).toString('hex'),
    };
    this.admin = new AdminServer(
      config.admin,
      {
        ready: () => this.ready(),
        status: () => this.status(),
        health: () => this.health(),
        routes: () => this.query('routes'),
        workers: () => this.query('workers'),
        metrics: () => this.metrics.render(),
      },
      logger.child({ module: 'admin' }),
    );
  }

  /** This node can serve its routes (node-health.ts: what fails it, and what does not). */
  ready(): boolean {
    return nodeReady({ draining: this.shuttingDown, started: this.announced, children: this.slots.map((slot) => slot.status) });
  }

  /** /healthz detail: liveness stays 200, this says what is degraded. */
  private health(): Record<string, unknown> {
    const statuses = this.slots.map((slot) => slot.status);
    return {
      ready: this.ready(),
      mode: this.mode(),
      bus: busState(statuses),
      children: { ready: statuses.filter((status) => status?.ready === true).length, total: this.slots.length },
    };
  }

  private mode(): 'embedded' | 'redis' {
    return this.options.config.cluster.redisUrl === undefined ? 'embedded' : 'redis';
  }

  private status(): Record<string, unknown> {
    const ports = this.slots.find((slot) => slot.status !== undefined)?.status?.ports;
    return {
      ...(ports === undefined ? {} : { http: ports.http, workers: ports.workers }),
      connectedWorkers: this.slots.reduce((sum, slot) => sum + (slot.status?.workers ?? 0), 0),
      routes: Math.max(0, ...this.slots.map((slot) => slot.status?.routes ?? 0)),
      nodeId: this.bootstrap.nodeId,
      mode: this.mode(),
      bus: busState(this.slots.map((slot) => slot.status)),
      children: this.slots.map((slot) => ({
        index: slot.index,
        pid: slot.worker?.process.pid,
        peerId: slot.status?.peerId,
        ready: slot.status?.ready ?? false,
        busSynced: slot.status?.busSynced ?? false,
        workers: slot.status?.workers ?? 0,
      })),
    };
  }

  async start(): Promise<void> {
    // A file_based store that cannot be read stops the start: the engine must not run on an empty copy.
    this.kvHost?.start();
    this.queueHost?.start();
    this.adminPort = await this.admin.start();
    cluster.setupPrimary({ execArgv: [...this.options.execArgv, ...this.options.config.cluster.childNodeArgs] });
    for (let index = 0; index < this.options.config.cluster.processes; index++) {
      const slot: Slot = { index, worker: undefined, channel: undefined, status: undefined, startedAt: 0, crashes: 0, restartTimer: undefined };
      this.slots.push(slot);
      this.fork(slot);
    }
  }

  private fork(slot: Slot): void {
    const bootstrap: ChildBootstrap = { ...this.bootstrap, index: slot.index };
    const worker = cluster.fork({ [CHILD_BOOTSTRAP_ENV]: JSON.stringify(bootstrap), MALLOC_ARENA_MAX: this.options.mallocArenaMax ?? CHILD_MALLOC_ARENA_MAX });
    const channel = channelOf(worker);
    slot.worker = worker;
    slot.channel = channel;
    slot.status = undefined;
    slot.startedAt = Date.now();
    this.relay.attach(channel);
    this.freshness.attach(channel);
    this.traceOwners.attach(channel);
    this.channelLiveness.attach(channel);
    this.kvHost?.attach(channel);
    this.queueHost?.attach(channel);
    worker.on('message', (message: unknown) => {
      if (isChildStatus(message)) this.onStatus(slot, message);
      else if (isAdminAnswer(message)) this.answer(message.id, message.data);
      // Once the cluster has been ready, a failing child is restarted like any crash instead.
      else if (isChildFatal(message) && !this.announced) this.options.onFatal(message.code, message.message);
    });
    worker.on('error', (err: Error) => this.options.logger.warn({ err, index: slot.index }, 'child IPC error'));
    worker.on('exit', (code: number | null, signal: string | null) => this.onExit(slot, worker, code, signal));
  }

  private onStatus(slot: Slot, status: ChildStatusMessage): void {
    const readinessChanged = slot.status?.ready !== status.ready;
    slot.status = status;
    if (readinessChanged) this.options.logger.info({ index: slot.index, peerId: status.peerId, ready: status.ready }, 'child readiness');
    const bus = busState(this.slots.map((s) => s.status));
    if (bus !== this.lastBusState) {
      this.lastBusState = bus;
      this.logBusState(bus);
    }
    if (!this.announced && this.ready()) {
      this.announced = true;
      const ports: EnginePorts = status.ports;
      const summary = readySummary(this.options.config, { http: ports.http, workers: ports.workers, admin: this.adminPort ?? this.options.config.admin.port });
      this.options.logger.info(
        {
          http: ports.http,
          workers: ports.workers,
          admin: this.adminPort,
          urls: summary.urls,
          next: summary.next,
          processes: this.slots.length,
          nodeId: this.bootstrap.nodeId,
          mode: this.options.config.cluster.redisUrl === undefined ? 'embedded' : 'redis',
          config: this.options.configSource,
        },
        'switchyard ready',
      );
    }
  }

  /** One line per node when its view of the cluster is lost or back (the children log each connection). */
  private logBusState(bus: BusState): void {
    if (bus === 'out_of_sync') {
      this.options.logger.warn({ bus }, 'cluster bus out of sync (Redis unreachable): serving the last known table; readiness unaffected');
    } else {
      this.options.logger.info({ bus }, 'cluster bus in sync again');
    }
  }

  private onExit(slot: Slot, worker: ClusterWorker, code: number | null, signal: string | null): void {
    if (slot.channel !== undefined) {
      this.relay.detach(slot.channel);
      this.freshness.detach(slot.channel);
      this.traceOwners.detach(slot.channel);
      this.channelLiveness.detach(slot.channel);
      this.kvHost?.detach(slot.channel);
      this.queueHost?.detach(slot.channel);
    }
    if (slot.worker !== worker) return;
    slot.worker = undefined;
    slot.channel = undefined;
    slot.status = undefined;
    if (this.shuttingDown) return;
    slot.crashes = Date.now() - slot.startedAt >= STABLE_AFTER_MS ? 1 : slot.crashes + 1;
    this.metrics.childRestarts.inc();
    const delay = Math.min(RESTART_BASE_MS * 2 ** (slot.crashes - 1), RESTART_MAX_MS);
    this.options.logger.warn({ index: slot.index, code, signal, restartInMs: delay }, 'child exited; restarting');
    slot.restartTimer = setTimeout(() => {
      slot.restartTimer = undefined;
      if (!this.shuttingDown) this.fork(slot);
    }, delay);
  }

  /** Asks one ready child for an admin view (every child holds the whole table); bounded wait. */
  private query(what: AdminQueryMessage['what']): Promise<unknown> {
    const slot = this.slots.find((s) => s.status?.ready === true && s.worker?.isConnected() === true);
    if (slot === undefined || slot.worker === undefined) return Promise.reject(new Error('no ready child to answer'));
    const id = this.nextQueryId++;
    const message: AdminQueryMessage = { sy: 'admin-query', id, what };
    return new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.queries.delete(id);
        reject(new Error(`child did not answer within ${ADMIN_QUERY_TIMEOUT_MS} ms`));
      }, ADMIN_QUERY_TIMEOUT_MS);
      this.queries.set(id, { resolve, timer });
      slot.worker?.send(message);
    });
  }

  private answer(id: number, data: unknown): void {
    const query = this.queries.get(id);
    if (query === undefined) return;
    this.queries.delete(id);
    clearTimeout(query.timer);
    query.resolve(data);
  }

  /** Readiness goes 503, children drain and exit, stragglers are killed after the grace. */
  async shutdown(): Promise<void> {
    if (this.shuttingDown) return;
    this.shuttingDown = true;
    const exits: Promise<void>[] = [];
    for (const slot of this.slots) {
      clearTimeout(slot.restartTimer);
      const worker = slot.worker;
      if (worker === undefined || worker.isDead()) continue;
      exits.push(new Promise<void>((resolve) => worker.once('exit', () => resolve())));
      slot.channel?.send({ sy: 'shutdown' });
    }
    const deadline = setTimeout(() => {
      for (const slot of this.slots) {
        if (slot.worker !== undefined && !slot.worker.isDead()) {
          this.options.logger.warn({ index: slot.index }, 'child did not exit in time; killing it');
          slot.worker.process.kill('SIGKILL');
        }
      }
    }, this.options.drainGraceMs + SHUTDOWN_SLACK_MS);
    await Promise.all(exits);
    clearTimeout(deadline);
    this.kvHost?.close();
    await this.queueHost?.close();
    await this.admin.close();
  }
}
