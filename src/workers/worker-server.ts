import { createServer } from 'node:http';
import { listen } from '../net/listen.js';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import type { RemoteChannelOpener } from '../channels/channel-endpoint.js';
import { CHANNEL_PATH_PREFIX, ChannelEndpoint } from '../channels/channel-endpoint.js';
import type { ChannelRegistry } from '../channels/channel-registry.js';
import type { WorkersConfig } from '../config/types.js';
import { TIMEOUT_CHECK_INTERVAL_MS } from '../http/http-server.js';
import type { WorkerConnectionDeps } from './worker-connection.js';
import { WorkerConnection } from './worker-connection.js';
import type { TelemetryCounters, TelemetrySink } from './telemetry-intake.js';
import { TelemetryIntake } from './telemetry-intake.js';

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

/** The heartbeat interval is split into this many ticks, each pinging a tenth of the workers. */
const HEARTBEAT_SLICES = 10;

/** The channel endpoint's parts: this process's channels, and how to reach other processes' channels. */
export interface WorkerServerChannels {
  registry: ChannelRegistry;
  openRemote?: RemoteChannelOpener;
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

  constructor(
    private readonly config: WorkersConfig,
    private readonly deps: WorkerConnectionDeps,
    private readonly logger: Logger,
    channels?: WorkerServerChannels,
    telemetry: WorkerServerTelemetry = {},
  ) {
    this.telemetry = new TelemetryIntake(logger.child({ module: 'telemetry' }), telemetry.counters, telemetry.sink);
    // An upgrade's headers must arrive within handshake_timeout_ms, and never later than a second
    // past the engine's default deadline.
    const headersTimeout = Math.min(config.handshakeTimeoutMs, deps.workerCallTimeoutMs + 1000);
    this.server = createServer({ headersTimeout, connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS }, (_req, res) => {
      res.writeHead(426, { 'content-type': 'text/plain', connection: 'close' });
      res.end('This port speaks the iii worker protocol over WebSocket.\n');
    });
    this.wss = new WebSocketServer({ noServer: true, maxPayload: config.maxFrameBytes, perMessageDeflate: false });
    this.server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) =>
      this.handleUpgrade(request, socket, head),
    );
    if (channels !== undefined) {
      this.channelEndpoint = new ChannelEndpoint(
        channels.registry,
        (request, socket, head, done) => this.wss.handleUpgrade(request, socket, head, done),
        logger.child({ module: 'channels' }),
        channels.openRemote,
      );
    }
  }

  /** Telemetry sockets connected (metrics). */
  get telemetrySockets(): number {
    return this.telemetry.size;
  }

  async start(): Promise<number> {
    await listen(this.server, { port: this.config.port, host: this.config.host });
    const port = (this.server.address() as AddressInfo).port;
    this.logger.info({ host: this.config.host, port }, 'worker listener started');
    this.startHeartbeat();
    return port;
  }

  /**
   * One timer for all workers, ticking HEARTBEAT_SLICES times per interval: each tick pings the
   * workers of one slice (each worker has a fixed slice), so every worker is pinged once per interval
   * but 1,000 workers never get 1,000 pings (and send 1,000 pongs) in one turn of the event loop.
   * Workers silent for longer than the timeout are dropped (docs/reliability.md#frozen-workers): between
   * heartbeat_timeout_ms and heartbeat_timeout_ms + 2 × heartbeat_interval_ms after their last frame or pong.
   */
  private startHeartbeat(): void {
    const intervalMs = this.config.heartbeatIntervalMs;
    if (intervalMs === 0) return;
    const maxSilentTicks = Math.ceil(this.config.heartbeatTimeoutMs / intervalMs);
    let tick = 0;
    this.heartbeatTimer = setInterval(() => {
      const slice = tick++ % HEARTBEAT_SLICES;
      for (const connection of [...this.deps.hub.all()]) {
        if (connection.heartbeatSlot % HEARTBEAT_SLICES !== slice) continue;
        if (connection.heartbeat(maxSilentTicks, intervalMs)) this.deps.onFrozen?.();
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
    this.wss.handleUpgrade(request, socket, head, (ws) => {
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
      if (telemetry) this.telemetry.attach(ws, socket);
      else new WorkerConnection(ws, this.deps, remoteAddress, socket).start();
    });
  }

  /** Closes every worker with 1001 so SDKs reconnect elsewhere, then the listener. Idempotent. */
  close(graceMs = 1000): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.heartbeatTimer);
      for (const connection of this.deps.hub.all()) connection.close(CLOSE_GOING_AWAY, 'engine shutting down');
      this.telemetry.close(CLOSE_GOING_AWAY, 'engine shutting down');
      const deadline = setTimeout(() => {
        for (const client of this.wss.clients) client.terminate();
      }, graceMs);
      await new Promise<void>((resolve) => this.wss.close(() => resolve()));
      await new Promise<void>((resolve) => {
        this.server.close(() => resolve());
        this.server.closeAllConnections();
      });
      clearTimeout(deadline);
    })();
    return this.closing;
  }
}
