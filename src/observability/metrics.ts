import { AggregatorRegistry, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { BoundedLabels } from './bounded-labels.js';
import { RequestSeries } from './request-series.js';

/**
 * The engine's Prometheus metrics (docs/operations.md#metrics). Each child keeps its own registry;
 * the primary's /metrics aggregates every child's over node:cluster IPC (prom-client's
 * AggregatorRegistry): counters and histograms sum, gauges sum unless they say otherwise (a table
 * version or route count is the same on every child, so it takes the max).
 */
const KNOWN_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
/** Route label for requests that matched no route, so unmatched paths cannot explode cardinality. */
export const UNMATCHED_ROUTE = '(unmatched)';

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export interface MetricSources {
  connectedWorkers(): number;
  localFunctions(): number;
  routes(): number;
  tableVersion(): number;
  inFlight(): number;
  openChannels(): number;
  /** Bytes this process's channels hold (channel-budget.ts). */
  channelBufferedBytes(): number;
  /** Bytes this process's worker sockets hold in unfinished messages, all listeners (partial-frames.ts). */
  partialFrameBytes(): number;
  /** Bytes queued towards this process's workers, as counted at their last sends, all listeners (queue-budget.ts). */
  queuedBytes(): number;
  /** Bytes the calls of this process's workers hold while in flight, all listeners (call-budget.ts). */
  callBytes(): number;
  telemetrySockets(): number;
  /** Workers connected anywhere in the cluster (cluster-census.ts). */
  clusterWorkers(): number;
  /** Workers serving each route's function, cluster-wide. */
  routeWorkers(): readonly { method: string; route: string; workers: number }[];
  /** This process's view of the cluster is in sync (false during a Redis outage). */
  busSynced(): boolean;
  /** This process's memory bound at the cluster's current size (src/workers/memory-bound.ts). */
  memoryBoundBytes(): number;
  /** Streamed bodies holding this process's raised heap growing factor (src/http/stream-heap.ts). */
  streamsHoldingHeap(): number;
  /** This process's id: the label that keeps its memory bound apart from the other processes' once the primary sums them. */
  pid: number;
}

/** `switchyard_memory_bound_bytes{pid}`: one series per process, so the primary's /metrics shows each child's. */
export function memoryBoundGauge(registers: Registry[], pid: number, bound: () => number): void {
  new Gauge({
    name: 'switchyard_memory_bound_bytes',
    help: 'The RSS the workers of this process\'s restricted (rbac) listeners can make it reach at every limit at once, computed from the config and the number of engine processes in the cluster (docs/security.md#what-one-process-can-be-made-to-hold); one series per process',
    labelNames: ['pid'],
    registers,
    collect() {
      this.reset();
      this.set({ pid: String(pid) }, bound());
    },
  });
}

/** How a streamed HTTP response ended (docs/streaming.md). */
export type StreamOutcome = 'complete' | 'cut';
/** A channel socket joined to another process (docs/streaming.md#across-the-cluster). */
export type ChannelLinkResult = 'opened' | 'refused' | 'failed';

const MAX_ERROR_CODES = 100;

/** Which route patterns the table routes: a set, or the route table's live view (RouteTable.routesPattern). */
export interface RoutePatterns {
  has(route: string): boolean;
}

export class EngineMetrics {
  readonly registry = new Registry();
  /** Requests by route, method and status, and their latency by route and path. */
  private readonly requests: RequestSeries;
  private readonly syncLag: Histogram;
  private readonly forwardErrors: Counter<'reason'>;
  private readonly reconnects: Counter;
  private readonly frozen: Counter;
  private readonly workerRefusals: Counter<'reason'>;
  private readonly routeConflicts: Counter<'kind'>;
  private readonly busRefusals: Counter<'reason'>;
  private readonly busLegacyPeers: Counter<'peer'>;
  private readonly graceWaits: Histogram<'outcome'>;
  private readonly middleware: Histogram<'phase' | 'outcome'>;
  private readonly streams: Counter<'outcome'>;
  private readonly telemetryFrames: Counter<'kind' | 'outcome'>;
  private readonly telemetryBytes: Counter<'kind'>;
  private readonly telemetryThrottles: Counter;
  private readonly spans: Counter;
  private readonly errorReplies: Counter;
  private readonly telemetryExports: Counter;
  private readonly channelLinks: Counter<'result'>;
  private readonly channelsCreated: Counter;
  private readonly channelsRefused: Counter<'reason'>;
  /** The table's route patterns (retainRoutes): a set, or the table's own live view; undefined until given. */
  private liveRoutes: RoutePatterns | undefined;
  private readonly errorCodes = new BoundedLabels(MAX_ERROR_CODES);

  constructor(sources: MetricSources) {
    const registers = [this.registry];
    // A request that matched a route just before it left records after the rebuild: dropped at the read.
    this.requests = new RequestSeries(this.registry, LATENCY_BUCKETS, () => this.dropStaleRoutes());
    memoryBoundGauge(registers, sources.pid, () => sources.memoryBoundBytes());
    new Gauge({ name: 'switchyard_http_requests_in_flight', help: 'Requests admitted and not yet finished', registers, collect() { this.set(sources.inFlight()); } });
    new Gauge({ name: 'switchyard_workers_connected', help: 'Worker WebSockets connected', registers, collect() { this.set(sources.connectedWorkers()); } });
    // Cluster-wide counts: every process holds the whole table, so the primary takes the max, and a
    // Prometheus rule takes the max over the nodes (deploy/prometheus/alerts.yml).
    new Gauge({ name: 'switchyard_cluster_workers', help: 'Workers connected anywhere in the cluster, as this node\'s table sees them', aggregator: 'max', registers, collect() { this.set(sources.clusterWorkers()); } });
    new Gauge({
      name: 'switchyard_route_workers',
      help: 'Workers anywhere in the cluster serving each route (0 while its last worker\'s reconnect grace runs)',
      labelNames: ['method', 'route'],
      aggregator: 'max',
      registers,
      collect() {
        this.reset();
        for (const { method, route, workers } of sources.routeWorkers()) this.set({ method, route }, workers);
      },
    });
    new Gauge({ name: 'switchyard_bus_in_sync', help: '1 while every process\'s view of the cluster is in sync; 0 during a Redis outage (routes keep serving)', aggregator: 'min', registers, collect() { this.set(sources.busSynced() ? 1 : 0); } });
    new Gauge({ name: 'switchyard_functions_registered', help: 'Functions registered by workers connected to this node', registers, collect() { this.set(sources.localFunctions()); } });
    new Gauge({ name: 'switchyard_routes', help: 'Routes in the (cluster-wide) route table', aggregator: 'max', registers, collect() { this.set(sources.routes()); } });
    new Gauge({ name: 'switchyard_table_version', help: 'Builds of the route table so far (grows on every change)', aggregator: 'max', registers, collect() { this.set(sources.tableVersion()); } });
    this.syncLag = new Histogram({
      name: 'switchyard_table_sync_lag_seconds',
      help: 'Time from a peer publishing its registrations to this process applying them',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    this.forwardErrors = new Counter({
      name: 'switchyard_forward_errors_total',
      help: 'Forwarded calls that failed: not_dispatched (retried elsewhere or unavailable), disconnected, timeout',
      labelNames: ['reason'],
      registers,
    });
    this.reconnects = new Counter({ name: 'switchyard_worker_reconnects_total', help: 'Workers that reattached after a reconnect', registers });
    this.frozen = new Counter({ name: 'switchyard_workers_dropped_frozen_total', help: 'Workers dropped by the heartbeat after sending nothing (not even a pong or data on their calls\' channels) for heartbeat_timeout_ms', registers });
    this.workerRefusals = new Counter({
      name: 'switchyard_worker_limit_hits_total',
      help: 'Per-worker limits hit (registrations, registration_bytes, reserved_id, channels, calls_in_flight, frames_per_second, queued_bytes), connections refused at the upgrade (connections, unauthenticated_connections) or by an auth function (auth_refused), sockets closed or calls refused for their listener\'s budgets in the process (partial_frame_bytes, listener_queued_bytes, listener_call_bytes)',
      labelNames: ['reason'],
      registers,
    });
    this.busLegacyPeers = new Counter({
      name: 'switchyard_bus_legacy_peers_total',
      help: 'Peers found speaking Redis bus protocol 1 (the previous build), by peer id: while one is live this node publishes full snapshots (docs/scale.md)',
      labelNames: ['peer'],
      registers,
    });
    this.busRefusals = new Counter({
      name: 'switchyard_bus_refused_total',
      help: 'Redis bus messages and peer keys refused: stale, replayed, unauthenticated, malformed, foreign_cluster (docs/security.md#between-nodes)',
      labelNames: ['reason'],
      registers,
    });
    this.routeConflicts = new Counter({
      name: 'switchyard_registration_conflicts_total',
      help: 'Registrations refused because another binding holds them: a route (method and path shape) or a function id of another principal',
      labelNames: ['kind'],
      registers,
    });
    this.graceWaits = new Histogram({
      name: 'switchyard_reconnect_grace_waits_seconds',
      help: 'Calls that waited for a departed worker to come back: served (it did), expired (grace over or nobody awaited), deadline',
      labelNames: ['outcome'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
      registers,
    });
    this.middleware = new Histogram({
      name: 'switchyard_middleware_duration_seconds',
      help: 'Time spent in middleware calls, by phase and outcome',
      labelNames: ['phase', 'outcome'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    new Gauge({
      name: 'switchyard_streams_heap_raised',
      help: 'Streamed request or response bodies moving at least 1 MiB a second, holding their process\'s raised heap growing factor (cluster.stream_heap_growing_percent)',
      registers,
      collect() {
        this.set(sources.streamsHoldingHeap());
      },
    });
    new Gauge({ name: 'switchyard_channels_open', help: 'Streaming channels held by this process (request bodies, responses, worker-to-worker)', registers, collect() { this.set(sources.openChannels()); } });
    new Gauge({
      name: 'switchyard_channel_buffered_bytes',
      help: 'Bytes the channels of this process hold: queued, or handed to a reader and not yet sent (bounded by max_channel_buffer_bytes)',
      registers,
      collect() {
        this.set(sources.channelBufferedBytes());
      },
    });
    this.channelsCreated = new Counter({ name: 'switchyard_channels_created_total', help: 'Channels made by engine::channels::create', registers });
    this.channelsRefused = new Counter({
      name: 'switchyard_channels_refused_total',
      help: 'engine::channels::create calls refused, by the limit hit: per_worker (max_channels_per_worker), per_listener (max_channels)',
      labelNames: ['reason'],
      registers,
    });
    this.streams = new Counter({
      name: 'switchyard_http_streams_total',
      help: 'HTTP responses streamed from a response channel, by how they ended: complete, or cut (worker died, handler failed, client left)',
      labelNames: ['outcome'],
      registers,
    });
    new Gauge({
      name: 'switchyard_worker_partial_frame_bytes',
      help: 'Bytes the worker sockets of a process hold in messages not yet received whole, 1 KiB counted per buffered chunk (bounded by each listener\'s max_partial_frame_bytes); the largest of the processes',
      aggregator: 'max',
      registers,
      collect() {
        this.set(sources.partialFrameBytes());
      },
    });
    new Gauge({
      name: 'switchyard_worker_queued_bytes',
      help: 'Bytes queued towards the workers of a process, as counted at each worker\'s last send (bounded by each listener\'s max_listener_queued_bytes); the largest of the processes',
      aggregator: 'max',
      registers,
      collect() {
        this.set(sources.queuedBytes());
      },
    });
    new Gauge({
      name: 'switchyard_worker_call_bytes',
      help: 'Bytes the calls workers of a process have in flight through the engine hold, by the size of their frames (bounded by each listener\'s max_listener_call_bytes); the largest of the processes',
      aggregator: 'max',
      registers,
      collect() {
        this.set(sources.callBytes());
      },
    });
    new Gauge({ name: 'switchyard_telemetry_sockets', help: 'Workers\' telemetry sockets (/otel) connected', registers, collect() { this.set(sources.telemetrySockets()); } });
    this.telemetryFrames = new Counter({
      name: 'switchyard_telemetry_frames_total',
      help: 'Telemetry frames received on /otel: accepted (handed to the exporter), dropped (no exporter, or its queue full), malformed (not an OTLP/MTRC/LOGS binary frame)',
      labelNames: ['kind', 'outcome'],
      registers,
    });
    this.telemetryBytes = new Counter({ name: 'switchyard_telemetry_bytes_total', help: 'Bytes of telemetry frames received on /otel', labelNames: ['kind'], registers });
    this.telemetryThrottles = new Counter({
      name: 'switchyard_telemetry_throttled_total',
      help: 'Times a telemetry socket was paused because the process read more telemetry than its budget',
      registers,
    });
    this.errorReplies = new Counter({
      name: 'switchyard_http_errors_total',
      help: 'Error envelopes answered, by code: the engine\'s (NOT_FOUND, TIMEOUT, FUNCTION_UNAVAILABLE, …; docs/errors.md) or a worker\'s own',
      labelNames: ['code'],
      registers,
    });
    this.spans = new Counter({
      name: 'switchyard_trace_spans_total',
      help: 'Sampled engine spans, by outcome: exported to the OTLP collector, or lost (queue_full: more than 2,048 waiting; export_failed: the collector did not take them)',
      labelNames: ['outcome'],
      registers,
    });
    this.telemetryExports = new Counter({
      name: 'switchyard_telemetry_exported_total',
      help: 'Worker telemetry frames relayed to the OTLP collector, by kind and outcome: sent, failed (the collector refused or was unreachable), dropped (more than 8 MiB waiting)',
      labelNames: ['kind', 'outcome'],
      registers,
    });
    this.channelLinks = new Counter({
      name: 'switchyard_channel_links_total',
      help: 'Worker channel sockets joined to the process holding the channel: opened, refused (unknown or used key), failed (peer unreachable)',
      labelNames: ['result'],
      registers,
    });
    // The primary asks children for their metrics over IPC; this registers the child's answer.
    AggregatorRegistry.setRegistries([this.registry]);
    new AggregatorRegistry();
  }

  request(route: string | undefined, method: string, status: number, seconds: number, forwarded: boolean): void {
    this.requests.record(route ?? UNMATCHED_ROUTE, KNOWN_METHODS.has(method) ? method : 'OTHER', status, seconds, forwarded ? 'forwarded' : 'local');
  }

  /**
   * Keeps request series only for routes in `live` (the table's route patterns), now and at every
   * scrape until the next call. Without it, each route that ever served a request kept a counter and
   * a histogram per label set for the life of the process: with workers that come and go under their
   * own ids the registry grew without bound (found by the memory soak, docs/soak.md). A route that
   * comes back starts from zero, which Prometheus reads as a counter reset.
   */
  retainRoutes(live: RoutePatterns): void {
    this.liveRoutes = live;
    this.dropStaleRoutes();
  }

  /**
   * Routes left the table (`live` being the table's own view, given once to retainRoutes): their
   * series go now, at a cost of the routes that left rather than of every route with series.
   */
  routesLeft(routes: Iterable<string>): void {
    const live = this.liveRoutes;
    if (live === undefined) return;
    for (const route of routes) if (!live.has(route)) this.dropRoute(route);
  }

  private dropStaleRoutes(): void {
    const live = this.liveRoutes;
    if (live === undefined) return;
    for (const route of this.requests.routes()) if (!live.has(route)) this.dropRoute(route);
  }

  /** Unmatched requests are one fixed label, never a table route: their series stay. */
  private dropRoute(route: string): void {
    if (route !== UNMATCHED_ROUTE) this.requests.drop(route);
  }

  tableSyncLag(seconds: number): void {
    this.syncLag.observe(Math.max(0, seconds));
  }

  forwardError(reason: 'not_dispatched' | 'disconnected' | 'timeout'): void {
    this.forwardErrors.inc({ reason });
  }

  workerReconnected(): void {
    this.reconnects.inc();
  }

  workerFrozen(): void {
    this.frozen.inc();
  }

  channelCreated(): void {
    this.channelsCreated.inc();
  }

  /** A refused engine::channels::create; also a worker limit hit (`channels`). */
  channelRefused(reason: string): void {
    this.channelsRefused.inc({ reason });
    this.workerRefusals.inc({ reason: 'channels' });
  }

  workerLimit(reason: string): void {
    this.workerRefusals.inc({ reason });
  }

  /** A refused bus message, by its code (`BUS_STALE` → `stale`). */
  busRefused(code: string): void {
    this.busRefusals.inc({ reason: code.replace(/^BUS_/, '').toLowerCase() });
  }

  /** A peer of the previous bus protocol was found (docs/scale.md#mixed-versions). */
  busLegacyPeer(peerId: string): void {
    this.busLegacyPeers.inc({ peer: peerId });
  }

  registrationConflict(kind: 'route' | 'function'): void {
    this.routeConflicts.inc({ kind });
  }

  /** A GraceObserver (src/invocation/grace-invoker.ts). */
  waited(outcome: 'served' | 'expired' | 'deadline', waitedMs: number): void {
    this.graceWaits.observe({ outcome }, waitedMs / 1000);
  }

  streamEnded(outcome: StreamOutcome): void {
    this.streams.inc({ outcome });
  }

  /** A TelemetryCounters (src/workers/telemetry-intake.ts). */
  telemetryFrame(kind: string, outcome: 'accepted' | 'dropped' | 'malformed', bytes: number): void {
    this.telemetryFrames.inc({ kind, outcome });
    this.telemetryBytes.inc({ kind }, bytes);
  }

  telemetryThrottled(): void {
    this.telemetryThrottles.inc();
  }

  /** A worker's own codes are free text: past 100 distinct ones they count as `other` (bounded series). */
  errorReply(code: string): void {
    this.errorReplies.inc({ code: this.errorCodes.label(code) });
  }

  spansExported(count: number): void {
    this.spans.inc({ outcome: 'exported' }, count);
  }

  spansDropped(reason: 'queue_full' | 'export_failed', count: number): void {
    this.spans.inc({ outcome: reason }, count);
  }

  telemetryExported(kind: string, outcome: 'sent' | 'failed' | 'dropped'): void {
    this.telemetryExports.inc({ kind, outcome });
  }

  channelLink(result: ChannelLinkResult): void {
    this.channelLinks.inc({ result });
  }

  middlewareCall(phase: string, outcome: 'continue' | 'respond' | 'failed', seconds: number): void {
    this.middleware.observe({ phase, outcome }, seconds);
  }
}
