import { STATUS_CODES, createServer } from 'node:http';
import { ignoreSocketError, listen } from '../net/listen.js';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import type { RemoteChannelOpener } from '../channels/channel-endpoint.js';
import { CHANNEL_PATH_PREFIX, ChannelEndpoint } from '../channels/channel-endpoint.js';
import type { ChannelRegistry } from '../channels/channel-registry.js';
import type { ChannelActivity } from '../channels/channel-activity.js';
import type { WorkersConfig } from '../config/types.js';
import type { EngineWireError } from '../protocol/messages.js';
import type { HttpErrorCode } from '../errors.js';
import { errorReply } from '../http/response.js';
import { resolveRequestId } from '../http/request-id.js';
import { TIMEOUT_CHECK_INTERVAL_MS } from '../http/http-server.js';
import type { WorkerConnectionDeps } from './worker-connection.js';
import { WorkerConnection } from './worker-connection.js';
import type { TelemetryCounters, TelemetrySink } from './telemetry-intake.js';
import { handOverTelemetrySocket } from './telemetry-handoff.js';
import { TelemetryIntake } from './telemetry-intake.js';
import type { ListenerPolicy } from './worker-session.js';
import { OPEN_AUTH, WorkerSession, authInput, parseAuthResult } from './worker-session.js';
import { CHUNK_COST_BYTES, PartialFrameBudget } from './partial-frames.js';
import { QueueBudget } from './queue-budget.js';
import { CallBudget } from './call-budget.js';
import { RegistrationBudget } from './registration-limits.js';
import { WarnThrottle } from '../observability/warn-throttle.js';
import { performance } from 'node:perf_hooks';
import type WebSocket from 'ws';

/** Close code for a worker refused at the door (wrong or missing token). */
export const CLOSE_UNAUTHORIZED = 4401;
/** A refused socket whose client does not answer our close frame is cut after this long. */
const REFUSED_CLOSE_GRACE_MS = 1000;

/** WebSocket "going away": the SDK reconnects, ideally to another process. */
export const CLOSE_GOING_AWAY = 1001;

function pathOf(request: IncomingMessage): string {
  const url = request.url ?? '/';
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

const BEARER = 'bearer ';

function tokenMatches(header: string | undefined, expected: string): boolean {
  // The scheme is case-insensitive (RFC 9110 §11.1): `bearer x` is the same credential as `Bearer x`.
  if (header === undefined || header.slice(0, BEARER.length).toLowerCase() !== BEARER) return false;
  const given = Buffer.from(header.slice(BEARER.length));
  const wanted = Buffer.from(expected);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

/**
 * The 503 at the upgrade for a listener at `max_connections` or `max_unauthenticated_connections`
 * (docs/security.md#connections): the error envelope, before any WebSocket handshake, so a refused
 * peer never gets a socket that reads frames.
 */
function refuseUpgrade(socket: Duplex, code: HttpErrorCode, message: string): void {
  const requestId = resolveRequestId(undefined);
  const reply = errorReply(code, requestId, { message });
  const body = reply.body as string;
  socket.end(
    `HTTP/1.1 ${reply.status} ${STATUS_CODES[reply.status] ?? ''}\r\ncontent-type: application/json\r\nx-request-id: ${requestId}\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

/** The heartbeat interval is split into this many ticks, each pinging a tenth of the workers. */
const HEARTBEAT_SLICES = 10;

/** The channel endpoint's parts: this process's channels, and how to reach other processes' channels. */
export interface WorkerServerChannels {
  registry: ChannelRegistry;
  openRemote?: RemoteChannelOpener;
  /** Where the traffic of workers' channel sockets is recorded for the heartbeat. */
  activity?: ChannelActivity;
}

/** The /otel socket's parts: counters, and the sink that takes decoded frames (none: all dropped). */
export interface WorkerServerTelemetry {
  counters?: TelemetryCounters;
  sink?: TelemetrySink;
}

/**
 * The worker port: `/` is the iii worker protocol; `/ws/channels/{id}` joins a streaming channel
 * (docs/streaming.md); `/otel` is where iii-sdk sends its telemetry (authenticated like `/`, bounded,
 * handed on or dropped: telemetry-intake.ts); anything else is refused with 404.
 */
export class WorkerServer {
  private readonly server: Server;
  private readonly wss: WebSocketServer;
  private readonly telemetry: TelemetryIntake;
  private closing: Promise<void> | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private readonly channelEndpoint: ChannelEndpoint | undefined;
  private readonly channelWss: WebSocketServer | undefined;

  /**
   * TCP connections not yet handed to an upgrade (plain HTTP, or an upgrade request still arriving):
   * at most max_connections of them, besides the upgraded ones, each for at most the headers timeout.
   */
  private readonly pending = new Set<Duplex>();
  /** Connections waiting for the auth function's answer (max_unauthenticated_connections). */
  private authenticating = 0;
  private readonly refusalWarnings: WarnThrottle;
  /** What this listener's sockets hold in unfinished messages (max_partial_frame_bytes). */
  private readonly partialFrames: PartialFrameBudget;
  /** What is queued towards this listener's workers (max_listener_queued_bytes). */
  private readonly queues: QueueBudget;
  /** What the calls of this listener's workers hold while in flight (max_listener_call_bytes). */
  private readonly calls: CallBudget;

  /** The connections this listener accepted (the hub holds those of every listener). */
  private readonly accepted = new Set<WorkerConnection>();
  private readonly policy: ListenerPolicy;

  private readonly deps: WorkerConnectionDeps;
  /** The socket under each accepted connection's WebSocket (the telemetry intake throttles on it). */
  private readonly rawSockets = new WeakMap<WorkerConnection, Duplex>();

  constructor(
    private readonly config: WorkersConfig,
    deps: WorkerConnectionDeps,
    private readonly logger: Logger,
    channels?: WorkerServerChannels,
    telemetry: WorkerServerTelemetry = {},
    /** Which `iii-worker-manager` entry this listener is: 0 is the main one. */
    index = 0,
  ) {
    this.policy = {
      index,
      limits: config.limits,
      ...(config.rbac === undefined ? {} : { rbac: config.rbac }),
      ...(config.middlewareFunctionId === undefined ? {} : { middlewareFunctionId: config.middlewareFunctionId }),
    };
    this.refusalWarnings = new WarnThrottle(logger, 10_000, 10);
    this.partialFrames = new PartialFrameBudget(config.maxPartialFrameBytes, {
      onEvicted: (held, total) => {
        deps.onLimit?.('partial_frame_bytes');
        this.refusalWarnings.warn(
          'partial_frame_bytes',
          { heldBytes: held, listenerBytes: total, limit: config.maxPartialFrameBytes },
          'worker socket closed: its unfinished message is the oldest of this listener, whose sockets hold max_partial_frame_bytes in unfinished messages',
        );
      },
    });
    this.queues = new QueueBudget(config.maxListenerQueuedBytes);
    this.calls = new CallBudget(config.maxListenerCallBytes);
    this.telemetry = new TelemetryIntake(logger.child({ module: 'telemetry' }), telemetry.counters, telemetry.sink);
    this.deps = {
      ...deps,
      ...(config.maxListenerRegistrationBytes === undefined ? {} : { listenerRegistrations: new RegistrationBudget(config.maxListenerRegistrationBytes) }),
      listenerQueues: this.queues,
      listenerCalls: this.calls,
      onTelemetrySocket: (connection, frame) => this.takeTelemetrySocket(connection, frame),
    };
    // An upgrade's headers must arrive within handshake_timeout_ms, and never later than a second
    // past the engine's default deadline.
    const headersTimeout = Math.min(config.handshakeTimeoutMs, deps.workerCallTimeoutMs + 1000);
    this.server = createServer({ headersTimeout, connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS }, (_req, res) => {
      res.writeHead(426, { 'content-type': 'text/plain', connection: 'close' });
      res.end('This port speaks the iii worker protocol over WebSocket.\n');
    });
    // ws holds a message's chunks until it is whole; a peer dribbling one byte per read would hold
    // ~760 bytes of RSS per byte sent, so the chunks of one message are bounded as well as its bytes
    // (each counts CHUNK_COST_BYTES against max_partial_frame_bytes too: partial-frames.ts).
    const maxChunks = Math.max(1024, Math.ceil(config.maxFrameBytes / CHUNK_COST_BYTES));
    this.wss = new WebSocketServer({ noServer: true, maxPayload: config.maxFrameBytes, maxBufferedChunks: maxChunks, maxFragments: maxChunks, perMessageDeflate: false });
    // Before its upgrade a connection is plain HTTP: bounded in time by the headers timeout, and in
    // number here (until 2026-11-26 any number could be held open, each with its socket and parser).
    this.server.on('connection', (socket: Duplex) => {
      if (this.pending.size >= config.maxConnections) {
        this.deps.onLimit?.('pending_connections');
        this.refusalWarnings.warn('pending_connections', { pending: this.pending.size, limit: config.maxConnections }, 'worker port connection refused: max_connections connections of this listener are not upgraded yet in this process');
        socket.on('error', ignoreSocketError);
        // The answer is written, then the socket closed whether or not the peer reads it.
        socket.once('finish', () => socket.destroy());
        refuseUpgrade(socket, 'TOO_MANY_CONNECTIONS', `this listener has ${config.maxConnections} connections not yet upgraded in this process (max_connections)`);
        return;
      }
      this.pending.add(socket);
      socket.once('close', () => this.pending.delete(socket));
    });
    this.server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      // From here the socket is a WebSocket's (counted by max_connections) or a channel's.
      this.pending.delete(socket);
      // Node takes its own error listener off a socket it hands to 'upgrade': without one, a reset
      // from the client (a refused channel connect, say) would be an uncaught error that ends the process.
      socket.on('error', ignoreSocketError);
      // A fault in handling one upgrade costs that connection, not the process and every request on it.
      try {
        this.handleUpgrade(request, socket, head);
      } catch (err) {
        this.logger.error({ err, remoteAddress: request.socket.remoteAddress, url: request.url }, 'worker upgrade failed: connection dropped');
        socket.destroy();
      }
    });
    if (channels !== undefined) {
      // Channel sockets take messages up to max_channel_frame_bytes (iii-sdk sends 64 KiB binary
      // frames), so a channel never holds a message larger than that (docs/security.md#channels).
      const channelWss = new WebSocketServer({ noServer: true, maxPayload: config.maxChannelFrameBytes, perMessageDeflate: false });
      this.channelWss = channelWss;
      this.channelEndpoint = new ChannelEndpoint(
        channels.registry,
        (request, socket, head, done) => channelWss.handleUpgrade(request, socket, head, done),
        logger.child({ module: 'channels' }),
        channels.openRemote,
        channels.activity,
      );
    }
  }

  /** Bytes this listener's sockets hold in unfinished messages (metrics). */
  get partialFrameBytes(): number {
    return this.partialFrames.held;
  }

  /** Bytes queued towards this listener's workers, as counted at their last sends (metrics). */
  get queuedBytes(): number {
    return this.queues.held;
  }

  /** Bytes the calls of this listener's workers hold while in flight (metrics). */
  get callBytes(): number {
    return this.calls.held;
  }

  /** Telemetry sockets connected (metrics). */
  get telemetrySockets(): number {
    return this.telemetry.size;
  }

  async start(): Promise<number> {
    await listen(this.server, { port: this.config.port, host: this.config.host });
    const port = (this.server.address() as AddressInfo).port;
    this.logger.info({ host: this.config.host, port, listener: this.policy.index, rbac: this.policy.rbac !== undefined }, 'worker listener started');
    this.startHeartbeat();
    return port;
  }

  /**
   * One timer for all workers, ticking HEARTBEAT_SLICES times per interval: each tick pings the
   * workers of one slice (each worker has a fixed slice), so every worker is pinged once per interval
   * but 1,000 workers never get 1,000 pings (and send 1,000 pongs) in one turn of the event loop.
   * Workers silent for longer than the timeout are dropped (docs/reliability.md#frozen-or-half-open-worker-heartbeat): between
   * heartbeat_timeout_ms and heartbeat_timeout_ms + 2 × heartbeat_interval_ms after their last frame or pong.
   */
  private startHeartbeat(): void {
    const intervalMs = this.config.heartbeatIntervalMs;
    if (intervalMs === 0) return;
    const maxSilentTicks = Math.ceil(this.config.heartbeatTimeoutMs / intervalMs);
    let tick = 0;
    this.heartbeatTimer = setInterval(() => {
      const slice = tick++ % HEARTBEAT_SLICES;
      for (const connection of [...this.accepted]) {
        if (connection.heartbeatSlot % HEARTBEAT_SLICES !== slice) continue;
        connection.heartbeat(maxSilentTicks, intervalMs);
      }
      if (slice === 0) this.telemetry.heartbeat(maxSilentTicks);
    }, intervalMs / HEARTBEAT_SLICES);
    this.heartbeatTimer.unref();
  }

  private handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    const path = pathOf(request);
    if (this.closing !== undefined) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    if (this.channelEndpoint !== undefined && path.startsWith(CHANNEL_PATH_PREFIX)) {
      this.channelEndpoint.handleUpgrade(request, socket, head);
      return;
    }
    const telemetry = path === '/otel' || path.startsWith('/otel/');
    if (!telemetry && path !== '/' && path !== '') {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    // Every WebSocket of the listener counts from its upgrade to its close: workers, telemetry
    // sockets, connections being authenticated and refused ones still closing.
    if (this.wss.clients.size >= this.config.maxConnections) {
      this.refuse(socket, request, 'connections', `this listener holds ${this.config.maxConnections} connections in this process already (max_connections)`);
      return;
    }
    const authFunctionId = this.policy.rbac?.authFunctionId;
    if (authFunctionId !== undefined && this.authenticating >= this.config.maxUnauthenticatedConnections) {
      this.refuse(socket, request, 'unauthenticated_connections', `this listener has ${this.config.maxUnauthenticatedConnections} connections waiting for the auth function in this process already (max_unauthenticated_connections)`);
      return;
    }
    this.wss.handleUpgrade(request, socket, head, (ws) => {
      this.partialFrames.track(ws, socket);
      const remoteAddress = request.socket.remoteAddress ?? 'unknown';
      const token = this.config.authToken;
      // /otel obeys the same token as / (iii's worker port runs the same gate on both).
      if (token !== undefined && !tokenMatches(request.headers.authorization, token)) {
        this.logger.warn({ remoteAddress, path: telemetry ? '/otel' : '/' }, 'worker refused: missing or invalid token');
        ws.close(CLOSE_UNAUTHORIZED, 'unauthorized: missing or invalid worker token');
        // A client that never answers the close cannot hold the socket for ws's 30 s close timeout.
        setTimeout(() => ws.terminate(), REFUSED_CLOSE_GRACE_MS).unref();
        return;
      }
      if (authFunctionId === undefined) {
        this.accept(ws, socket, remoteAddress, telemetry, new WorkerSession(this.policy, OPEN_AUTH));
        return;
      }
      this.authenticate(request, ws, socket, remoteAddress, telemetry, authFunctionId);
    });
  }

  /** A 503 `TOO_MANY_CONNECTIONS` at the upgrade, counted and logged (throttled: a flood of them is one attack). */
  private refuse(socket: Duplex, request: IncomingMessage, reason: 'connections' | 'unauthenticated_connections', message: string): void {
    this.deps.onLimit?.(reason);
    this.refusalWarnings.warn(reason, { remoteAddress: request.socket.remoteAddress, reason, connections: this.wss.clients.size, authenticating: this.authenticating }, `worker connection refused: ${message}`);
    refuseUpgrade(socket, 'TOO_MANY_CONNECTIONS', message);
  }

  private accept(ws: WebSocket, socket: Duplex, remoteAddress: string, telemetry: boolean, session: WorkerSession): void {
    if (telemetry) {
      this.telemetry.attach(ws, socket);
      return;
    }
    const connection = new WorkerConnection(ws, this.deps, remoteAddress, socket, session);
    this.accepted.add(connection);
    this.rawSockets.set(connection, socket);
    ws.once('close', () => this.accepted.delete(connection));
    connection.start();
  }

  /** iii-sdk 0.9's telemetry socket on `/` is not a worker (telemetry-handoff.ts). */
  private takeTelemetrySocket(connection: WorkerConnection, frame: Buffer): void {
    this.accepted.delete(connection);
    handOverTelemetrySocket(connection, this.rawSockets.get(connection), frame, this.telemetry, this.logger);
  }

  /**
   * iii's RBAC handshake (rbac_session.rs): the listener's auth function is called with the upgrade's
   * headers, query and address; its result is the session. The socket is not read meanwhile: frames
   * the worker sends wait in TCP (they cost this process nothing) and are handled, in order, once it
   * is in. A failure is sent as an `error` frame, then the socket closes.
   */
  private authenticate(request: IncomingMessage, ws: WebSocket, socket: Duplex, remoteAddress: string, telemetry: boolean, authFunctionId: string): void {
    ws.pause();
    this.authenticating++;
    let counted = true;
    const settled = (): void => {
      if (counted) this.authenticating--;
      counted = false;
    };
    const deadline = performance.now() + this.deps.workerCallTimeoutMs;
    void this.deps.invoker.invoke(authFunctionId, authInput(request), { deadline }).then((outcome) => {
      settled();
      ws.resume();
      if (ws.readyState !== ws.OPEN) return;
      if (this.closing !== undefined) {
        ws.close(CLOSE_GOING_AWAY, 'engine shutting down');
        return;
      }
      const result = outcome.ok ? parseAuthResult(outcome.value) : { error: outcome.failure.message };
      if ('error' in result) {
        this.deps.onLimit?.('auth_refused');
        this.logger.warn({ remoteAddress, path: telemetry ? '/otel' : '/', reason: result.error }, 'worker refused by the auth function');
        const error: EngineWireError = { code: 'AUTH_ERROR', message: result.error };
        ws.send(JSON.stringify({ type: 'error', error }));
        ws.close();
        setTimeout(() => ws.terminate(), REFUSED_CLOSE_GRACE_MS).unref();
        return;
      }
      this.accept(ws, socket, remoteAddress, telemetry, new WorkerSession(this.policy, result));
    }).catch((err: unknown) => {
      settled();
      // As for the upgrade itself: a fault costs this connection, never the process.
      this.logger.error({ err, remoteAddress }, 'worker authentication failed: connection dropped');
      ws.terminate();
    });
  }

  /** Closes every worker with 1001 so SDKs reconnect elsewhere, then the listener. Idempotent. */
  close(graceMs = 1000): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.heartbeatTimer);
      for (const connection of this.accepted) connection.close(CLOSE_GOING_AWAY, 'engine shutting down');
      this.telemetry.close(CLOSE_GOING_AWAY, 'engine shutting down');
      const deadline = setTimeout(() => {
        for (const client of this.wss.clients) client.terminate();
        for (const client of this.channelWss?.clients ?? []) client.terminate();
      }, graceMs);
      await new Promise<void>((resolve) => this.wss.close(() => resolve()));
      const channelWss = this.channelWss;
      if (channelWss !== undefined) await new Promise<void>((resolve) => channelWss.close(() => resolve()));
      await new Promise<void>((resolve) => {
        this.server.close(() => resolve());
        this.server.closeAllConnections();
      });
      clearTimeout(deadline);
    })();
    return this.closing;
  }
}
