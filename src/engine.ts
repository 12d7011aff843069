import { RegistrationBudget } from './workers/registration-limits.js';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Bus } from './bus/bus.js';
import { ClusterInvoker } from './cluster/cluster-invoker.js';
import { ClusterMembership } from './cluster/membership.js';
import type { PeerIdentity } from './cluster/peer-id.js';
import { PeerPool } from './cluster/peer-pool.js';
import type { EngineConfig, WorkersConfig } from './config/types.js';
import { ForwardServer } from './forwarding/forward-server.js';
import type { ForwardTls } from './forwarding/forward-tls.js';
import { HttpPipeline } from './http/pipeline.js';
import { HttpServer } from './http/http-server.js';
import { GraceInvoker } from './invocation/grace-invoker.js';
import type { Invoker } from './invocation/invoker.js';
import { EngineMetrics } from './observability/metrics.js';
import type { PeerEndpoint } from './routing/registrations.js';
import { RouteTable } from './routing/route-table.js';
import { routesView, workersView } from './routing/admin-views.js';
import { LocalInvoker } from './workers/local-invoker.js';
import type { WorkerConnection, WorkerConnectionDeps } from './workers/worker-connection.js';
import { WorkerHub, retireRelayed } from './workers/worker-hub.js';
import type { ChannelRequest } from './channels/channel-endpoint.js';
import { ChannelRegistry } from './channels/channel-registry.js';
import { channelAttachDecision } from './channels/channel-attach.js';
import { ChannelActivity } from './channels/channel-activity.js';
import { ChannelLivenessProbe } from './cluster/channel-liveness.js';
import { CREATE_CHANNEL_FUNCTION, createChannelFunction } from './engine-functions/channels-create.js';
import { EngineFunctions } from './workers/engine-functions.js';
import { REGISTER_WORKER_FUNCTION, registerWorkerFunction } from './workers/worker-connection.js';
import { WorkerServer } from './workers/worker-server.js';
import { ConflictRefusals } from './workers/conflict-refusals.js';
import { TriggerDelivery } from './workers/trigger-delivery.js';
import { FreshnessBarrier } from './cluster/freshness.js';
import { TraceOwnerQuestions } from './cluster/trace-owner-questions.js';
import { introspectionFunctions } from './engine-functions/introspection.js';
import { logFunctions } from './engine-functions/log.js';
import { HttpFunctionCaller } from './invocation/http-function-caller.js';
import type { OtlpRelay } from './observability/otlp-relay.js';
import { workerTelemetryRelay } from './observability/otlp-relay.js';
import { WorkerLogPrinter, printsWorkerLogs, teeSinks } from './observability/worker-log-printer.js';
import { RecentTraceOwners } from './observability/trace-owners.js';
import { clusterWorkerCount, routeWorkerCounts } from './observability/cluster-census.js';
import type { Tracing } from './observability/tracing.js';
import { createTracing } from './observability/tracing.js';
import { ModuleHost } from './modules/module-host.js';
import type { IpcChannel } from './bus/ipc-channel.js';
import type { StreamHeapGrowth } from './http/stream-heap.js';
import type { MemoryBound } from './workers/memory-bound.js';
import { engineMemoryBound } from './workers/memory-bound.js';

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
  /** Mutual TLS on the TCP forward links (cluster forward_tls). */
  tls?: ForwardTls;
}

export interface EngineOptions {
  config: EngineConfig;
  logger: Logger;
  /** How long in-flight requests may run on close before their connections are cut. */
  drainGraceMs?: number;
  cluster?: EngineClusterOptions;
  /** Add the x-switchyard-served-by response header (debugging, benchmarks). */
  servedByHeader?: boolean;
  /** Where HTTP-invoked functions' auth secrets are read from (the process environment). */
  env?: Readonly<Record<string, string | undefined>>;
  /** A cluster child's IPC link to the primary, which holds embedded module stores (docs/modules.md). */
  primary?: IpcChannel;
  /**
   * Raises the process's V8 heap growing factor while large bodies stream (src/http/stream-heap.ts):
   * a cluster child's, whose V8 flags the engine set; an engine in a process of its own has none.
   */
  streamHeap?: StreamHeapGrowth;
  /** The process's id, for the metric series kept apart per process (`switchyard_memory_bound_bytes{pid}`); 0 when unset. */
  pid?: number;
}

export interface EnginePorts {
  http: number;
  workers: number;
  forward?: PeerEndpoint;
}

type Phase = 'created' | 'starting' | 'running' | 'closing' | 'closed';

const DEFAULT_DRAIN_GRACE_MS = 10_000;

const mib = (bytes: number): number => Math.round((bytes / (1024 * 1024)) * 10) / 10;

/** One engine process wired together: start() in order, close() in reverse. */
export class Engine {
  readonly table: RouteTable;
  readonly hub: WorkerHub<WorkerConnection>;
  readonly invoker: Invoker;
  readonly metrics: EngineMetrics;
  /** Streaming channels held by this process (docs/streaming.md). */
  readonly channels: ChannelRegistry;
  /** When workers' channel sockets here last moved data, and the question of it across the node (docs/reliability.md). */
  private readonly channelActivity: ChannelActivity;
  private readonly channelLiveness: ChannelLivenessProbe;
  private readonly engineFunctions: EngineFunctions;
  private readonly httpFunctions: HttpFunctionCaller;
  private readonly tracing: Tracing;
  private readonly relay: OtlpRelay | undefined;
  private readonly localInvoker: LocalInvoker;
  private readonly pipeline: HttpPipeline;
  private readonly httpServer: HttpServer;
  private readonly workerServer: WorkerServer;
  /** Registrations that lost to an older holder: refused once the conflict has settled. */
  private readonly conflicts: ConflictRefusals;
  /** Further `iii-worker-manager` listeners (typically RBAC ones), sharing the hub with the main one. */
  private readonly extraWorkerServers: WorkerServer[];
  private readonly forwardServer: ForwardServer | undefined;
  private readonly peers: PeerPool | undefined;
  private readonly membership: ClusterMembership | undefined;
  /** iii's state, stream, pubsub, cron, queue modules (src/modules/). */
  private readonly modules: ModuleHost;
  private readonly freshness: FreshnessBarrier | undefined;
  /** Which worker each recent trace went to, when workers' log lines are printed (their worker id). */
  private readonly traceOwners: RecentTraceOwners | undefined;
  /** A cluster child's questions to its siblings about the traces they sent (cluster/trace-owner-questions.ts). */
  private readonly traceQuestions: TraceOwnerQuestions | undefined;
  private phase: Phase = 'created';
  private closing: Promise<void> | undefined;

  constructor(private readonly options: EngineOptions) {
    const { config, logger, cluster } = options;
    this.table = new RouteTable(config.api.ignoreTrailingSlash, config.api.middleware);
    this.hub = new WorkerHub<WorkerConnection>(cluster?.identity.peerId ?? `local-${randomUUID()}`, config.workers.reconnectGraceMs);
    this.table.setLocalSource(this.hub);
    this.hub.onChange(() => {
      this.table.markChanged();
      this.membership?.localChanged();
    });
    this.table.onChange((state) =>
      logger.debug({ tableVersion: state.version, routes: state.router.size, middleware: state.middleware.ordered.length, functions: state.functionOwners.size, work: state.work }, 'table rebuilt'),
    );
    // Workers' log records name their worker by the trace the engine sent it (observability/trace-owners.ts).
    this.traceOwners = printsWorkerLogs(config.observability) ? new RecentTraceOwners() : undefined;
    this.traceQuestions = this.traceOwners === undefined || options.primary === undefined ? undefined : new TraceOwnerQuestions(options.primary, this.traceOwners);
    this.localInvoker = new LocalInvoker(this.hub, this.traceOwners);
    this.channels = new ChannelRegistry(this.hub.ownerId, logger.child({ module: 'channels' }), undefined, config.workers.maxChannelBufferBytes);
    // Kept for twice the longest heartbeat timeout: a question is about the last timeout only.
    const heartbeatTimeoutMs = Math.max(config.workers.heartbeatTimeoutMs, ...config.workers.extraListeners.map((listener) => listener.heartbeatTimeoutMs));
    this.channelActivity = new ChannelActivity(2 * heartbeatTimeoutMs);
    this.channelLiveness = new ChannelLivenessProbe(this.channelActivity, options.primary);
    this.engineFunctions = new EngineFunctions()
      .register(REGISTER_WORKER_FUNCTION, registerWorkerFunction)
      .register(CREATE_CHANNEL_FUNCTION, createChannelFunction(this.channels, { created: () => this.metrics.channelCreated(), refused: (reason) => this.metrics.channelRefused(reason) }));
    for (const [id, fn] of introspectionFunctions({
      snapshots: () => this.table.snapshotsHeld(),
      engineFunctionIds: () => this.engineFunctions.ids(),
    })) {
      this.engineFunctions.register(id, fn);
    }
    for (const [id, fn] of logFunctions(logger.child({ module: 'worker-log' }))) this.engineFunctions.register(id, fn);
    this.httpFunctions = new HttpFunctionCaller(config.httpFunctions, options.env ?? {});
    // Worker-provided trigger types: after every rebuild, each provider here gets what it should hold.
    // A cluster child first makes sure its copy of the siblings' triggers is current (freshness.ts).
    this.freshness =
      cluster === undefined || options.primary === undefined
        ? undefined
        : new FreshnessBarrier(options.primary, {
            peerId: this.hub.ownerId,
            flush: () => this.membership?.flush(),
            heldVersions: () => this.table.ownerVersions(),
            onChange: (listener) => this.table.onChange(listener),
          });
    const barrier = this.freshness;
    const delivery = new TriggerDelivery(
      this.hub.ownerId,
      () => this.hub.all(),
      logger.child({ module: 'triggers' }),
      barrier === undefined ? undefined : { pass: () => barrier.pass(), retry: () => this.table.markChanged() },
    );
    this.table.onChange(() => delivery.reconcile(this.table.snapshotsHeld()));
    this.metrics = new EngineMetrics({
      connectedWorkers: () => this.hub.size,
      localFunctions: () => this.hub.snapshot().functions.length,
      routes: () => this.table.current().router.size,
      tableVersion: () => this.table.current().version,
      inFlight: () => this.pipeline.activeRequests,
      openChannels: () => this.channels.size,
      channelBufferedBytes: () => this.channels.bufferedBytes,
      partialFrameBytes: () => [this.workerServer, ...this.extraWorkerServers].reduce((sum, server) => sum + server.partialFrameBytes, 0),
      queuedBytes: () => [this.workerServer, ...this.extraWorkerServers].reduce((sum, server) => sum + server.queuedBytes, 0),
      callBytes: () => [this.workerServer, ...this.extraWorkerServers].reduce((sum, server) => sum + server.callBytes, 0),
      telemetrySockets: () => this.workerServer.telemetrySockets,
      clusterWorkers: () => clusterWorkerCount(this.table.snapshotsHeld()),
      routeWorkers: () => routeWorkerCounts(this.table.current(), this.table.snapshotsHeld()),
      busSynced: () => this.busSynced(),
      memoryBoundBytes: () => this.memoryBound().bytes,
      streamsHoldingHeap: () => options.streamHeap?.streams ?? 0,
      pid: options.pid ?? 0,
    });
    this.tracing = createTracing(config.observability, logger.child({ module: 'tracing' }), this.metrics);
    this.relay = workerTelemetryRelay(config.observability, logger.child({ module: 'telemetry' }), this.metrics);
    // Request metrics keep series only for routes still in the table: each change drops the series of
    // the routes it removed, and each scrape any other left (EngineMetrics.retainRoutes), so routes
    // that come and go do not grow the registry.
    this.metrics.retainRoutes({ has: (route) => this.table.routesPattern(route) });
    this.table.onChange((state) => this.metrics.routesLeft(state.routesLeft));
    let invoker: Invoker = this.localInvoker;
    if (cluster !== undefined) {
      this.peers = new PeerPool(this.table, {
        selfNodeId: cluster.identity.nodeId,
        selfPeerId: cluster.identity.peerId,
        secret: cluster.secret,
        cluster: cluster.clusterName,
        logger: logger.child({ module: 'forward' }),
        metrics: this.metrics,
        ...(cluster.tls === undefined ? {} : { tls: cluster.tls }),
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
        ...(cluster.tls === undefined ? {} : { tls: cluster.tls }),
        secret: cluster.secret,
        cluster: cluster.clusterName,
        // Forwarded calls run on this process's workers only: a forward is never forwarded again.
        invoker: this.localInvoker,
        logger: logger.child({ module: 'forward' }),
        tracing: this.tracing,
        onRetire: retireRelayed(this.hub, logger.child({ module: 'workers' })),
        onChannelAttach: (request) => channelAttachDecision(this.channels, request),
      });
      cluster.bus.observeRefusals?.((code) => this.metrics.busRefused(code));
      cluster.bus.observeLegacyPeers?.((peerId) => this.metrics.busLegacyPeer(peerId));
      this.membership = new ClusterMembership({
        identity: cluster.identity,
        bus: cluster.bus,
        table: this.table,
        local: this.hub,
        peers: this.peers,
        ignoreTrailingSlash: config.api.ignoreTrailingSlash,
        metrics: this.metrics,
        logger: logger.child({ module: 'cluster' }),
      });
    }
    // Reconnect grace on the calling side only: a forwarded call that finds no worker on its peer
    // comes back as not dispatched, and the peer that took the request waits and retries.
    this.invoker = new GraceInvoker(invoker, this.table, config.workers.reconnectGraceMs, this.metrics);
    this.modules = new ModuleHost({ config, logger, peerId: this.hub.ownerId, invoker: this.invoker, registry: this.metrics.registry, ...(options.primary === undefined ? {} : { primary: options.primary }) });
    this.modules.registerFunctions(this.engineFunctions);
    this.table.onChange(() => this.modules.reconcile(this.table.snapshotsHeld()));
    const workerDeps: WorkerConnectionDeps = {
      hub: this.hub,
      invoker: this.invoker,
      logger: logger.child({ module: 'workers' }),
      ignoreTrailingSlash: config.api.ignoreTrailingSlash,
      workerCallTimeoutMs: config.api.defaultTimeoutMs,
      onReattach: () => this.metrics.workerReconnected(),
      onFrozen: () => this.metrics.workerFrozen(),
      channelLiveness: this.channelLiveness,
      onLimit: (kind) => this.metrics.workerLimit(kind),
      functionMetadata: (id) => this.table.current().functionMetadata.get(id),
      engineFunctions: this.engineFunctions,
      engineTriggerTypes: this.modules,
      registrationBudget: new RegistrationBudget(),
      httpFunctions: this.httpFunctions,
      ...(this.traceOwners === undefined ? {} : { traces: this.traceOwners }),
      ...(this.membership === undefined
        ? {}
        : { retireElsewhere: (workerId: string, token: string) => this.membership?.retireElsewhere(workerId, token) ?? 0 }),
    };
    const peers = this.peers;
    const workerChannels = {
      registry: this.channels,
      activity: this.channelActivity,
      ...(peers === undefined ? {} : { openRemote: (tag: string, request: ChannelRequest) => peers.openChannel(tag, request) }),
    };
    // Workers' log records are printed (iii's logs_console_output) and, with an exporter, relayed too.
    const owners = this.traceOwners;
    const questions = this.traceQuestions;
    const attribution = owners === undefined ? undefined : { owners, ...(questions === undefined ? {} : { askSiblings: (traceId: string) => questions.ask(traceId) }) };
    const sinks = [
      ...(attribution === undefined ? [] : [new WorkerLogPrinter(logger.child({ module: 'worker-log' }), attribution)]),
      ...(this.relay === undefined ? [] : [this.relay]),
    ];
    const workerTelemetry = { counters: this.metrics, ...(sinks.length === 0 ? {} : { sink: teeSinks(sinks) }) };
    const workerServer = (listener: WorkersConfig, index: number): WorkerServer =>
      new WorkerServer(listener, workerDeps, logger.child({ module: 'workers', ...(index === 0 ? {} : { listener: index }) }), workerChannels, workerTelemetry, index);
    this.workerServer = workerServer(config.workers, 0);
    this.extraWorkerServers = config.workers.extraListeners.map((listener, i) => workerServer(listener, i + 1));
    // Registrations another binding holds: this process drops its own losers and tells their workers.
    const conflictBarrier = this.freshness;
    this.conflicts = new ConflictRefusals(
      this.hub.ownerId,
      () => this.table.current(),
      (workerId) => this.hub.get(workerId)?.registrations,
      (kind) => this.metrics.registrationConflict(kind),
      conflictBarrier === undefined ? undefined : { pass: () => conflictBarrier.pass() },
    );
    this.table.onChange((state) => this.conflicts.seen(state));
    this.pipeline = new HttpPipeline({
      config: config.api,
      table: this.table,
      invoker: this.invoker,
      logger: logger.child({ module: 'http' }),
      metrics: this.metrics,
      channels: this.channels,
      tracing: this.tracing,
      ...(options.streamHeap === undefined ? {} : { streamHeap: options.streamHeap }),
      ...(options.servedByHeader === true ? { servedBy: this.hub.ownerId } : {}),
    });
    this.httpServer = new HttpServer(config.api, this.pipeline, logger.child({ module: 'http' }));
  }

  /** The cluster's routes and middleware, with the peers that serve each function (GET /routes). */
  routesView(): Record<string, unknown> {
    return routesView(this.table.current());
  }

  /** Every connected worker in the cluster with its functions (GET /workers). */
  workersView(): Record<string, unknown>[] {
    return workersView(this.table.snapshotsHeld(), { ownerId: this.hub.ownerId, nodeId: this.membership?.endpoint?.nodeId });
  }

  /**
   * Started (listening, the cluster's table loaded once) and not closing: this process can serve its
   * routes. A bus that loses Redis later does not change it (docs/operations.md#readiness).
   */
  ready(): boolean {
    return this.phase === 'running';
  }

  /** This process's view of the cluster is complete: false during a Redis outage, when the last known table serves. */
  busSynced(): boolean {
    return this.membership?.synced ?? true;
  }

  async start(): Promise<EnginePorts> {
    if (this.phase !== 'created') throw new Error(`engine cannot start from phase ${this.phase}`);
    this.phase = 'starting';
    try {
      // The forward listener and the bus before HTTP, so that the first request already sees every
      // peer's routes. Admin is the primary's (src/supervisor/primary.ts). The tracer first: an
      // exporting one loads the OpenTelemetry SDK before anything is traced.
      await this.tracing.ready();
      const forward = await this.startCluster();
      await this.modules.start();
      const workers = await this.workerServer.start();
      for (const server of this.extraWorkerServers) await server.start();
      const http = await this.httpServer.start();
      const bound = this.memoryBound();
      this.options.logger.info(
        { boundMiB: mib(bound.bytes), processes: this.processCount(), fixedMiB: mib(bound.fixedBytes), perProcessMiB: mib(bound.perProcessBytes), termsMiB: Object.fromEntries(Object.entries(bound.terms).map(([term, bytes]) => [term, mib(bytes)])) },
        'memory bound: what the restricted listeners\' workers can make this process hold (docs/security.md#what-one-process-can-be-made-to-hold)',
      );
      this.phase = 'running';
      return { http, workers, ...(forward === undefined ? {} : { forward }) };
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  /** Engine processes whose registrations this one holds: itself and every peer in its table. */
  private processCount(): number {
    return this.table.ownerVersions().size + 1;
  }

  /** This process's memory bound at the cluster's current size. */
  private memoryBound(): MemoryBound {
    return engineMemoryBound(this.options.config.workers, Math.max(this.processCount(), this.options.config.cluster.processes));
  }

  private async startCluster(): Promise<PeerEndpoint | undefined> {
    const cluster = this.options.cluster;
    if (cluster === undefined || this.forwardServer === undefined || this.membership === undefined) return undefined;
    const bound = await this.forwardServer.start();
    const endpoint: PeerEndpoint = {
      nodeId: cluster.identity.nodeId,
      ...(bound.socketPath === undefined ? {} : { socketPath: bound.socketPath }),
      ...(cluster.tcp === undefined || bound.port === undefined ? {} : { host: cluster.tcp.advertiseHost, port: bound.port }),
    };
    await this.membership.join(endpoint);
    return endpoint;
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
      const grace = this.options.drainGraceMs ?? DEFAULT_DRAIN_GRACE_MS;
      const steps: [string, () => Promise<void> | undefined][] = [
        ['bus', () => {
          this.freshness?.close();
          this.traceQuestions?.close();
          return this.membership?.leave();
        }],
        ['http', () => this.httpServer.close(grace)],
        ['forward', () => this.forwardServer?.close()],
        ['channels', () => {
          this.channels.close();
          this.channelLiveness.close();
          return undefined;
        }],
        ['workers', async () => {
          await Promise.all([this.workerServer.close(), ...this.extraWorkerServers.map((server) => server.close())]);
        }],
        ['modules', () => this.modules.close()],
        ['peers', () => this.peers?.close()],
        ['conflicts', () => {
          this.conflicts.close();
          return undefined;
        }],
        ['http functions', () => this.httpFunctions.close()],
        ['tracing', () => {
          this.relay?.close();
          return this.tracing.shutdown();
        }],
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
