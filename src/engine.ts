import { performance } from 'node:perf_hooks';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Bus } from './cluster/bus.js';
import { ClusterInvoker } from './cluster/cluster-invoker.js';
import type { PeerIdentity } from './cluster/peer-id.js';
import { incarnationOf } from './cluster/peer-id.js';
import { PeerPool } from './cluster/peer-pool.js';
import { checkSnapshot } from './cluster/snapshot-check.js';
import type { EngineConfig } from './config/types.js';
import { RETIRE_WORKER_FUNCTION } from './forwarding/forward-messages.js';
import { ForwardServer } from './forwarding/forward-server.js';
import { HttpPipeline } from './http/pipeline.js';
import { HttpServer } from './http/http-server.js';
import { GraceInvoker } from './invocation/grace-invoker.js';
import type { Invoker } from './invocation/invoker.js';
import { EngineMetrics } from './observability/metrics.js';
import type { PeerEndpoint } from './routing/registrations.js';
import { RouteTable } from './routing/route-table.js';
import { LocalInvoker } from './workers/local-invoker.js';
import { WorkerHub } from './workers/worker-hub.js';
import { WorkerServer } from './workers/worker-server.js';

/** What makes an engine a cluster peer: who it is, how it syncs, where peers reach it. */
export interface EngineClusterOptions {
  identity: PeerIdentity;
  bus: Bus;
  secret: string;
  clusterName: string;
  /** Unix socket for peers of this node. */
  socketPath: string;
  /** TCP listener for peers of other nodes (distributed mode), and the host they dial. */
  tcp?: { bindHost: string; port: number; advertiseHost: string };
}

export interface EngineOptions {
  config: EngineConfig;
  logger: Logger;
  /** How long in-flight requests may run on close before their connections are cut. */
  drainGraceMs?: number;
  cluster?: EngineClusterOptions;
  /** Add the x-switchyard-served-by response header (debugging, benchmarks). */
  servedByHeader?: boolean;
}

export interface EnginePorts {
  http: number;
  workers: number;
  forward?: PeerEndpoint;
}

type Phase = 'created' | 'starting' | 'running' | 'closing' | 'closed';

const DEFAULT_DRAIN_GRACE_MS = 10_000;
/** Registrations are published at most this often: a reconnect storm becomes a few snapshots. */
const PUBLISH_COALESCE_MS = 5;
/**
 * A large snapshot also waits this many times what publishing the last one cost here (bounded by
 * PUBLISH_MAX_DELAY_MS): every peer parses and applies each full snapshot, so a burst of 10,000
 * registrations published every 5 ms made the sibling's work grow with the square of the table.
 */
const PUBLISH_COST_FACTOR = 10;
const PUBLISH_MAX_DELAY_MS = 200;

/** One engine process wired together: start() in order, close() in reverse. */
export class Engine {
  readonly table: RouteTable;
  readonly hub: WorkerHub;
  readonly invoker: Invoker;
  readonly metrics: EngineMetrics;
  private readonly localInvoker: LocalInvoker;
  private readonly pipeline: HttpPipeline;
  private readonly httpServer: HttpServer;
  private readonly workerServer: WorkerServer;
  private readonly forwardServer: ForwardServer | undefined;
  private readonly peers: PeerPool | undefined;
  private endpoint: PeerEndpoint | undefined;
  private publishTimer: NodeJS.Timeout | undefined;
  /** What the last publish cost this process (snapshot and send), in ms. */
  private lastPublishCostMs = 0;
  private phase: Phase = 'created';
  private closing: Promise<void> | undefined;

  constructor(private readonly options: EngineOptions) {
    const { config, logger, cluster } = options;
    this.table = new RouteTable(config.api.ignoreTrailingSlash, config.api.middleware);
    this.hub = new WorkerHub(cluster?.identity.peerId ?? `local-${randomUUID()}`, config.workers.reconnectGraceMs);
    this.table.setLocalSource(this.hub);
    this.hub.onChange(() => {
      this.table.markChanged();
      this.schedulePublish();
    });
    this.table.onChange((state) =>
      logger.debug({ tableVersion: state.version, routes: state.router.size, middleware: state.middleware.ordered.length, functions: state.functionOwners.size }, 'table rebuilt'),
    );
    this.localInvoker = new LocalInvoker(this.hub);
    this.metrics = new EngineMetrics({
      connectedWorkers: () => this.hub.size,
      localFunctions: () => this.hub.snapshot().functions.length,
      routes: () => this.table.current().router.size,
      tableVersion: () => this.table.current().version,
      inFlight: () => this.pipeline.activeRequests,
    });
    // Request metrics keep series only for routes still in the table: every rebuild drops the others
    // (EngineMetrics.retainRoutes), so routes that come and go do not grow the registry.
    this.table.onChange((state) => this.metrics.retainRoutes(new Set(state.routes.map((route) => route.pattern.source))));
    let invoker: Invoker = this.localInvoker;
    if (cluster !== undefined) {
      this.peers = new PeerPool(this.table, {
        selfNodeId: cluster.identity.nodeId,
        selfPeerId: cluster.identity.peerId,
        secret: cluster.secret,
        cluster: cluster.clusterName,
        logger: logger.child({ module: 'forward' }),
      });
      invoker = new ClusterInvoker(
        this.localInvoker,
        this.table,
        this.peers,
        cluster.identity.peerId,
        logger.child({ module: 'invoker' }),
        this.metrics,
      );
      this.forwardServer = new ForwardServer({
        socketPath: cluster.socketPath,
        ...(cluster.tcp === undefined ? {} : { tcp: { host: cluster.tcp.bindHost, port: cluster.tcp.port } }),
        secret: cluster.secret,
        cluster: cluster.clusterName,
        // Forwarded calls run on this process's workers only: a forward is never forwarded again.
        invoker: this.localInvoker,
        logger: logger.child({ module: 'forward' }),
        onRetire: (workerId, token) => this.retireLocal(workerId, token),
      });
    }
    // Reconnect grace on the calling side only: a forwarded call that finds no worker on its peer
    // comes back as not dispatched, and the peer that took the request waits and retries.
    this.invoker = new GraceInvoker(invoker, this.table, config.workers.reconnectGraceMs, this.metrics);
    this.workerServer = new WorkerServer(
      config.workers,
      {
        hub: this.hub,
        invoker: this.invoker,
        logger: logger.child({ module: 'workers' }),
        ignoreTrailingSlash: config.api.ignoreTrailingSlash,
        workerCallTimeoutMs: config.api.defaultTimeoutMs,
        onReattach: () => this.metrics.workerReconnected(),
        onFrozen: () => this.metrics.workerFrozen(),
        ...(cluster === undefined ? {} : { retireElsewhere: (workerId: string, token: string) => this.retireElsewhere(workerId, token) }),
      },
      logger.child({ module: 'workers' }),
    );
    this.pipeline = new HttpPipeline({
      config: config.api,
      table: this.table,
      invoker: this.invoker,
      logger: logger.child({ module: 'http' }),
      metrics: this.metrics,
      ...(options.servedByHeader === true ? { servedBy: this.hub.ownerId } : {}),
    });
    this.httpServer = new HttpServer(config.api, this.pipeline, logger.child({ module: 'http' }));
  }

  /** A peer relays a reattach: retire that worker's connection if it is here and the token matches. */
  private retireLocal(workerId: string, token: string): void {
    const result = this.hub.retire(workerId, token);
    const logger = this.options.logger.child({ module: 'workers' });
    if (result === 'retired') logger.info({ previousWorkerId: workerId }, 'retired a connection whose worker reattached on another peer');
    else if (result === 'wrong-token') logger.warn({ previousWorkerId: workerId }, 'retire request with a wrong reattach token ignored');
  }

  /**
   * A worker reattached here; its previous connection is on another peer (or gone). Every peer whose
   * snapshot lists that worker is asked to retire it; the token is checked there.
   */
  private retireElsewhere(workerId: string, token: string): number {
    if (this.peers === undefined) return 0;
    let asked = 0;
    for (const snapshot of this.table.snapshotsHeld()) {
      if (snapshot.ownerId === this.hub.ownerId) continue;
      if (snapshot.workers?.some((worker) => worker.id === workerId) !== true) continue;
      if (this.peers.fire(snapshot.ownerId, RETIRE_WORKER_FUNCTION, { worker_id: workerId, reattach_token: token })) asked++;
    }
    return asked;
  }

  /** The cluster's routes and middleware, with the peers that serve each function (GET /routes). */
  routesView(): Record<string, unknown> {
    const state = this.table.current();
    const ownersOf = (functionId: string): readonly string[] => state.functionOwners.get(functionId) ?? [];
    return {
      tableVersion: state.version,
      routes: state.routes.map((route) => ({
        method: route.method,
        path: route.pattern.source,
        function_id: route.functionId,
        owners: ownersOf(route.functionId),
        ...(route.conditionFunctionId === undefined ? {} : { condition_function_id: route.conditionFunctionId }),
        ...(route.middlewareFunctionIds === undefined ? {} : { middleware_function_ids: route.middlewareFunctionIds }),
      })),
      middleware: state.middleware.ordered.map((m) => ({
        function_id: m.functionId,
        phase: m.phase,
        priority: m.priority,
        ...(m.scopePath === undefined ? {} : { scope: m.scopePath }),
        owners: ownersOf(m.functionId),
      })),
    };
  }

  /** Every connected worker in the cluster with its functions (GET /workers). */
  workersView(): Record<string, unknown>[] {
    const out: Record<string, unknown>[] = [];
    for (const snapshot of this.table.snapshotsHeld()) {
      // This process's own snapshot carries no endpoint (it is added when published).
      const node = snapshot.endpoint?.nodeId ?? (snapshot.ownerId === this.hub.ownerId ? this.endpoint?.nodeId : undefined);
      for (const worker of snapshot.workers ?? []) {
        out.push({
          ...worker,
          peer: snapshot.ownerId,
          ...(node === undefined ? {} : { node }),
          functions: snapshot.functions.filter((fn) => fn.workerId === worker.id).map((fn) => fn.id),
        });
      }
    }
    return out;
  }

  /** Listening, and (in a cluster) holding an in-sync view of every peer. */
  ready(): boolean {
    return this.phase === 'running' && (this.options.cluster?.bus.synced ?? true);
  }

  async start(): Promise<EnginePorts> {
    if (this.phase !== 'created') throw new Error(`engine cannot start from phase ${this.phase}`);
    this.phase = 'starting';
    try {
      // The forward listener and the bus before HTTP, so that the first request already sees every
      // peer's routes. Admin is the primary's (src/cluster/primary.ts).
      const forward = await this.startCluster();
      const workers = await this.workerServer.start();
      const http = await this.httpServer.start();
      this.phase = 'running';
      return { http, workers, ...(forward === undefined ? {} : { forward }) };
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  private async startCluster(): Promise<PeerEndpoint | undefined> {
    const cluster = this.options.cluster;
    if (cluster === undefined || this.forwardServer === undefined) return undefined;
    const bound = await this.forwardServer.start();
    this.endpoint = {
      nodeId: cluster.identity.nodeId,
      ...(bound.socketPath === undefined ? {} : { socketPath: bound.socketPath }),
      ...(cluster.tcp === undefined || bound.port === undefined ? {} : { host: cluster.tcp.advertiseHost, port: bound.port }),
    };
    const ignoreTrailingSlash = this.options.config.api.ignoreTrailingSlash;
    const logger = this.options.logger.child({ module: 'cluster' });
    await cluster.bus.start({
      snapshot: (received) => {
        const checked = checkSnapshot(received, ignoreTrailingSlash);
        if (!checked.ok) {
          logger.warn({ ownerId: received.ownerId, code: 'BUS_MALFORMED', reason: checked.reason }, 'peer snapshot refused');
          return;
        }
        const snapshot = checked.snapshot;
        if (this.table.endpointOf(snapshot.ownerId) === undefined) {
          if (this.supersedeIncarnations(snapshot.ownerId) === 'stale') {
            logger.debug({ peerId: snapshot.ownerId }, 'snapshot of an earlier incarnation of a restarted child ignored');
            return;
          }
          logger.info({ peerId: snapshot.ownerId, endpoint: snapshot.endpoint }, 'peer joined');
        }
        this.table.applySnapshot(snapshot);
        if (snapshot.publishedAt !== undefined) this.metrics.tableSyncLag((Date.now() - snapshot.publishedAt) / 1000);
      },
      peerGone: (peerId) => {
        if (this.table.removeOwner(peerId)) logger.info({ peerId }, 'peer left');
        this.peers?.drop(peerId);
      },
    });
    this.publishNow();
    return this.endpoint;
  }

  /**
   * A peer id is node/index/epoch, and a node runs one child per index at a time: a later epoch means
   * the child restarted and the earlier incarnation is dead. Dropping it now, not when its lease runs
   * out, converges faster after a child crash (Redis mode; embedded drops it at once anyway). Returns
   * 'stale' when the joining peer is itself the earlier incarnation (a dead child's key reloaded).
   */
  private supersedeIncarnations(peerId: string): 'live' | 'stale' {
    const joining = incarnationOf(peerId);
    if (joining === undefined) return 'live';
    // An earlier incarnation of this very child (its key outlived it in Redis).
    if (incarnationOf(this.hub.ownerId)?.slot === joining.slot) return 'stale';
    for (const held of [...this.table.ownerVersions().keys()]) {
      const other = incarnationOf(held);
      if (held === peerId || other?.slot !== joining.slot) continue;
      if (other.startedMs > joining.startedMs) return 'stale';
      if (this.table.removeOwner(held)) {
        this.options.logger.child({ module: 'cluster' }).info({ peerId: held, replacedBy: peerId }, 'peer replaced by a restarted incarnation');
      }
      this.peers?.drop(held);
    }
    return 'live';
  }

  private schedulePublish(): void {
    if (this.options.cluster === undefined || this.endpoint === undefined || this.publishTimer !== undefined) return;
    const delayMs = Math.min(PUBLISH_MAX_DELAY_MS, Math.max(PUBLISH_COALESCE_MS, this.lastPublishCostMs * PUBLISH_COST_FACTOR));
    this.publishTimer = setTimeout(() => {
      this.publishTimer = undefined;
      this.publishNow();
    }, delayMs);
  }

  private publishNow(): void {
    const cluster = this.options.cluster;
    if (cluster === undefined || this.endpoint === undefined || this.phase === 'closed') return;
    const started = performance.now();
    cluster.bus.publish({ ...this.hub.snapshot(), endpoint: this.endpoint, publishedAt: Date.now() });
    this.lastPublishCostMs = performance.now() - started;
  }

  /**
   * Leaves the cluster first (peers stop sending here), drains HTTP while forwarded calls still run,
   * then closes the forward listener, workers (1001: they reconnect elsewhere) and peer clients.
   * Idempotent; keeps going past a failing step.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.phase = 'closing';
      // Refuse new requests at once (503 SHUTTING_DOWN), before any await.
      this.pipeline.startDraining();
      this.options.logger.info({ inFlight: this.pipeline.activeRequests }, 'draining');
      clearTimeout(this.publishTimer);
      const grace = this.options.drainGraceMs ?? DEFAULT_DRAIN_GRACE_MS;
      const steps: [string, () => Promise<void> | undefined][] = [
        ['bus', () => this.options.cluster?.bus.close()],
        ['http', () => this.httpServer.close(grace)],
        ['forward', () => this.forwardServer?.close()],
        ['workers', () => this.workerServer.close()],
        ['peers', () => this.peers?.close()],
      ];
      for (const [name, step] of steps) {
        try {
          await step();
        } catch (err) {
          this.options.logger.error({ err, step: name }, 'engine close step failed');
        }
      }
      this.phase = 'closed';
    })();
    return this.closing;
  }
}
