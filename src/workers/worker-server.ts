import { createServer } from 'node:http';
import { listen } from '../net/listen.js';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import type WebSocket from 'ws';
import type { WorkersConfig } from '../config/types.js';
import type { WorkerConnectionDeps } from './worker-connection.js';
import { WorkerConnection } from './worker-connection.js';

/** Close code for a worker refused at the door (wrong or missing token). */
export const CLOSE_UNAUTHORIZED = 4401;
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

/**
 * The worker port: `/` is the iii worker protocol; `/otel` is where iii-sdk sends its telemetry
 * (accepted and discarded, so SDK defaults work unchanged); anything else is refused with 404.
 */
export class WorkerServer {
  private readonly server: Server;
  private readonly wss: WebSocketServer;
  private readonly telemetrySockets = new Set<WebSocket>();
  private closing: Promise<void> | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: WorkersConfig,
    private readonly deps: WorkerConnectionDeps,
    private readonly logger: Logger,
  ) {
    this.server = createServer((_req, res) => {
      res.writeHead(426, { 'content-type': 'text/plain', connection: 'close' });
      res.end('This port speaks the iii worker protocol over WebSocket.\n');
    });
    this.wss = new WebSocketServer({ noServer: true, maxPayload: config.maxFrameBytes, perMessageDeflate: false });
    this.server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) =>
      this.handleUpgrade(request, socket, head),
    );
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
    }, intervalMs / HEARTBEAT_SLICES);
    this.heartbeatTimer.unref();
  }

  private handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    const path = pathOf(request);
    if (this.closing !== undefined) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    if (path === '/otel' || path.startsWith('/otel/')) {
      this.wss.handleUpgrade(request, socket, head, (ws) => this.acceptTelemetry(ws));
      return;
    }
    if (path !== '/' && path !== '') {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    this.wss.handleUpgrade(request, socket, head, (ws) => {
      const remoteAddress = request.socket.remoteAddress ?? 'unknown';
      const token = this.config.authToken;
      if (token !== undefined && !tokenMatches(request.headers.authorization, token)) {
        this.logger.warn({ remoteAddress }, 'worker refused: missing or invalid token');
        ws.close(CLOSE_UNAUTHORIZED, 'unauthorized: missing or invalid worker token');
        return;
      }
      new WorkerConnection(ws, this.deps, remoteAddress, socket).start();
    });
  }

  private acceptTelemetry(ws: WebSocket): void {
    this.telemetrySockets.add(ws);
    ws.on('message', () => undefined);
    ws.on('error', () => undefined);
    ws.on('close', () => this.telemetrySockets.delete(ws));
  }

  /** Closes every worker with 1001 so SDKs reconnect elsewhere, then the listener. Idempotent. */
  close(graceMs = 1000): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.heartbeatTimer);
      for (const connection of this.deps.hub.all()) connection.close(CLOSE_GOING_AWAY, 'engine shutting down');
      for (const ws of this.telemetrySockets) ws.close(CLOSE_GOING_AWAY, 'engine shutting down');
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
