import { createServer } from 'node:http';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import type WebSocket from 'ws';
import { listen } from '../../net/listen.js';
import { isPlainObject } from '../../values.js';
import type { StreamCalls } from './stream-functions.js';
import type { StreamClientDeps } from './stream-client.js';
import { StreamClient } from './stream-client.js';
import type { StreamAuthInput } from './stream-wire.js';
import { queryToMultiMap } from './stream-wire.js';

/** How long closing waits for clients to answer the close frame before cutting them. */
const CLOSE_WAIT_MS = 1000;

export interface StreamServerOptions {
  host: string;
  port: number;
  /** Called when a client connects; its answer's `context` goes to the join/leave handlers. */
  authFunction?: string;
  /** Largest client frame accepted (bytes); a larger one closes the connection (1009). */
  maxMessageBytes: number;
  /** Connections this process accepts at once; more are refused with 503. */
  maxConnections: number;
}

/** The client's address as iii shows it to the auth function: `ip:port`, IPv6 in brackets. */
function addressOf(request: IncomingMessage): string {
  const ip = request.socket.remoteAddress ?? '';
  const port = request.socket.remotePort ?? 0;
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}

export function authInputOf(request: IncomingMessage): StreamAuthInput {
  const url = request.url ?? '/';
  const q = url.indexOf('?');
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    headers[name] = Array.isArray(value) ? (value[value.length - 1] ?? '') : value;
  }
  return { headers, path: q === -1 ? url : url.slice(0, q), query_params: q === -1 ? {} : queryToMultiMap(url.slice(q + 1)), addr: addressOf(request) };
}

/**
 * The stream client listener (iii's port 3112): a WebSocket on which browsers and other clients
 * `join` and `leave` stream groups and receive their changes (docs/stream.md#the-client-socket).
 * Every engine process listens on the shared port; a client's socket lands on one of them, and that
 * process serves it (it hears every change in the cluster).
 */
export class StreamServer {
  private readonly server: Server;
  private readonly wss: WebSocketServer;
  private readonly clients = new Set<StreamClient>();
  private closing: Promise<void> | undefined;

  constructor(
    private readonly options: StreamServerOptions,
    private readonly calls: StreamCalls,
    private readonly clientDeps: StreamClientDeps,
    private readonly logger: Logger,
  ) {
    this.server = createServer((_req, res) => {
      res.writeHead(426, { 'content-type': 'text/plain', upgrade: 'websocket', connection: 'close' });
      res.end('stream clients connect with a WebSocket upgrade\n');
    });
    this.wss = new WebSocketServer({ noServer: true, maxPayload: options.maxMessageBytes, perMessageDeflate: false });
    this.server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => void this.upgrade(request, socket, head));
  }

  get connections(): number {
    return this.clients.size;
  }

  async start(): Promise<number> {
    await listen(this.server, { host: this.options.host, port: this.options.port });
    const port = (this.server.address() as AddressInfo).port;
    this.logger.info({ host: this.options.host, port }, 'stream listener started');
    return port;
  }

  private async upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    if (this.closing !== undefined || this.clients.size >= this.options.maxConnections) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      if (this.closing === undefined) this.clientDeps.onDropped('connections');
      return;
    }
    const context = await this.authenticate(request);
    if (socket.destroyed || this.closing !== undefined) {
      socket.destroy();
      return;
    }
    this.wss.handleUpgrade(request, socket, head, (ws: WebSocket) => {
      const client = new StreamClient(ws, context, this.clientDeps);
      this.clients.add(client);
      this.logger.debug({ addr: addressOf(request), clients: this.clients.size }, 'stream client connected');
      ws.on('close', () => this.clients.delete(client));
    });
  }

  /**
   * As iii: the auth function's `context` rides with the connection; a failing auth function, or an
   * answer that is not an object, leaves it without one (the connection is still accepted: refusing a
   * subscription is the `stream:join` handlers' job).
   */
  private async authenticate(request: IncomingMessage): Promise<unknown> {
    const functionId = this.options.authFunction;
    if (functionId === undefined) return null;
    const outcome = await this.calls.invoke(functionId, authInputOf(request));
    if (!outcome.ok) {
      this.logger.error({ functionId, code: outcome.failure.code }, 'stream auth function failed');
      return null;
    }
    return isPlainObject(outcome.value) ? (outcome.value.context ?? null) : null;
  }

  /** Stops accepting, closes every client (1001), then the listener. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
      for (const client of this.clients) client.close();
      // Clients that do not answer the close frame soon are cut: closing never waits on a client.
      const deadline = Date.now() + CLOSE_WAIT_MS;
      while (this.clients.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      for (const client of this.clients) client.terminate();
      this.server.closeAllConnections();
      await closed;
      this.wss.close();
    })();
    return this.closing;
  }
}
