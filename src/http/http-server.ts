import { createServer, STATUS_CODES } from 'node:http';
import { listen } from '../net/listen.js';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { ApiConfig } from '../config/types.js';
import type { HttpErrorCode } from '../errors.js';
import { FramingGuard, MAX_HEAD_BYTES } from './framing-guard.js';
import { checkParserHook } from './parser-hook-check.js';
import type { HttpPipeline } from './pipeline.js';
import { resolveRequestId } from './request-id.js';
import { errorReply } from './response.js';

/** Headers must arrive within this (slowloris bound), whatever the request deadline. */
export const HEADERS_TIMEOUT_MS = 10_000;
/** The header block's byte limit, the same for Node's parser and the framing guard. */
export const MAX_HEADER_BYTES = MAX_HEAD_BYTES;
/**
 * How often Node checks headersTimeout and requestTimeout. Its default (30 s) let a client trickling
 * headers hold a connection for up to 30 s whatever headersTimeout said; once a second keeps the
 * bound within a second of what docs/http.md promises, for one pass over the open connections.
 */
export const TIMEOUT_CHECK_INTERVAL_MS = 1000;

/**
 * What the server keeps per connection, on the socket under a symbol: it is read for every chunk and
 * every request, where a WeakMap or WeakSet lookup per read showed in the engine's profile
 * (docs/performance.md, issue 26).
 */
interface ConnectionState {
  /** Being refused: nothing more the connection sends reaches Node's parser. */
  refusing: boolean;
  /** The responses not yet finished, in request order (docs/http.md#framing). */
  readonly unfinished: ServerResponse[];
}
const CONNECTION_STATE = Symbol('switchyard.connectionState');
type WithState = Duplex & { [CONNECTION_STATE]?: ConnectionState };

function stateOf(socket: Duplex): ConnectionState {
  const holder = socket as WithState;
  return (holder[CONNECTION_STATE] ??= { refusing: false, unfinished: [] });
}

/** Finished, or never will be (the connection closed under it). */
const isDone = (res: ServerResponse): boolean => res.writableFinished || res.destroyed;

/** The HTTP listener: binds, hands requests to the pipeline, drains on close. */
export class HttpServer {
  private readonly server: Server;
  private closing: Promise<void> | undefined;

  constructor(
    private readonly config: ApiConfig,
    private readonly pipeline: HttpPipeline,
    private readonly logger: Logger,
  ) {
    this.server = createServer(
      {
        headersTimeout: Math.min(HEADERS_TIMEOUT_MS, config.defaultTimeoutMs + 1000),
        // No whole-request timer: the pipeline answers a slow body it reads itself (408) within the
        // request deadline, and a body streamed to a handler may take as long as the handler reads it
        // (docs/streaming.md#timeouts); Node's timer would cut a long upload mid-stream.
        requestTimeout: 0,
        connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
        maxHeaderSize: MAX_HEADER_BYTES,
        keepAliveTimeout: 5000,
      },
      // One listener for 'request' (each one more makes Node copy the listener list per request).
      (req: IncomingMessage, res: ServerResponse) => {
        pipeline.handle(req, res);
        this.track(req.socket, res);
      },
    );
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => this.refuse(err, socket));
    this.server.on('connection', (socket: Socket) => this.guard(socket));
  }

  /**
   * Puts a FramingGuard between the socket and Node's parser: Node gets only the bytes of requests
   * the guard frames the same way; at the first one it refuses, the connection stops being read and
   * is answered 400 `MALFORMED_REQUEST` after the responses to the requests before it.
   */
  private guard(socket: Socket): void {
    const [nodeOnData] = socket.listeners('data') as ((chunk: Buffer) => void)[];
    // checkParserHook() made sure at start that there is one; never serve a connection unguarded.
    if (nodeOnData === undefined) {
      socket.destroy();
      return;
    }
    socket.removeListener('data', nodeOnData);
    const guard = new FramingGuard();
    const state = stateOf(socket);
    socket.on('data', (chunk: Buffer) => {
      if (state.refusing) return;
      const verdict = guard.scan(chunk);
      if (verdict.ok) {
        nodeOnData.call(socket, chunk);
        return;
      }
      state.refusing = true;
      if (verdict.offset > 0) nodeOnData.call(socket, chunk.subarray(0, verdict.offset));
      socket.pause();
      // The reason goes to the log; the client gets the stable code and message every refusal gets.
      this.logger.info({ reason: verdict.reason, remoteAddress: socket.remoteAddress }, 'request refused: ambiguous framing');
      this.afterResponses(socket, () => this.writeRefusal(socket, verdict.code));
    });
  }

  private track(socket: Socket, res: ServerResponse): void {
    const list = stateOf(socket).unfinished;
    // No listeners per request: a connection's responses finish in order, so the finished ones are
    // dropped from the front as the next arrives, and a refusal skips any others it finds.
    while (list.length > 0 && isDone(list[0] as ServerResponse)) list.shift();
    list.push(res);
  }

  /**
   * Runs `then` once the responses to every request received whole on `socket` are finished (at once
   * when there are none): those requests came before the refused bytes. A request whose body was
   * still arriving is the refused one itself; it gets no answer of its own.
   */
  private afterResponses(socket: Socket | Duplex, then: () => void): void {
    const list = stateOf(socket).unfinished;
    const last = [...list].reverse().find((res) => !isDone(res) && res.req.complete);
    if (last === undefined) {
      then();
      return;
    }
    let done = false;
    const once = (): void => {
      if (done) return;
      done = true;
      then();
    };
    last.once('finish', once);
    last.once('close', once);
  }

  /**
   * What Node's parser refuses before the pipeline sees a request (bad framing, smuggling attempts,
   * oversized or late headers) is answered with the engine's error envelope and the connection is
   * closed, so nothing after the refused bytes is ever parsed as another request.
   */
  private refuse(err: NodeJS.ErrnoException, socket: Duplex): void {
    if (!socket.writable || err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const state = stateOf(socket);
    if (state.refusing) return;
    state.refusing = true;
    socket.pause();
    const code = clientErrorCode(err.code);
    const message = code === 'REQUEST_TIMEOUT' ? 'Request headers were not received in time' : undefined;
    this.logger.debug({ parserError: err.code, code }, 'request refused before parsing completed');
    // Requests parsed before the refused bytes are answered first, in order (a pipelined garbage line
    // must not cost the request before it its response).
    this.afterResponses(socket, () => this.writeRefusal(socket, code, message));
  }

  /** The error envelope with a generated request id, then the connection is closed. */
  private writeRefusal(socket: Duplex, code: HttpErrorCode, message?: string): void {
    if (socket.destroyed || !socket.writable) {
      socket.destroy();
      return;
    }
    const requestId = resolveRequestId(undefined);
    const reply = errorReply(code, requestId, message === undefined ? {} : { message });
    const body = reply.body as string;
    const head = [
      `HTTP/1.1 ${reply.status} ${STATUS_CODES[reply.status] ?? ''}`,
      'content-type: application/json',
      `${this.config.requestIdHeader}: ${requestId}`,
      'connection: close',
      `content-length: ${Buffer.byteLength(body)}`,
    ];
    socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
  }

  async start(): Promise<number> {
    checkParserHook();
    await listen(this.server, { port: this.config.port, host: this.config.host });
    const port = (this.server.address() as AddressInfo).port;
    this.logger.info({ host: this.config.host, port }, 'http listener started');
    return port;
  }

  /**
   * Stops accepting, lets admitted requests finish within `graceMs`, then cuts what is left.
   * Idempotent: a second call returns the same promise.
   */
  close(graceMs: number): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      this.pipeline.startDraining();
      const force = setTimeout(() => {
        this.logger.warn({ inFlight: this.pipeline.activeRequests }, 'drain grace over; closing remaining connections');
        this.server.closeAllConnections();
      }, graceMs);
      this.server.close(() => {
        clearTimeout(force);
        resolve();
      });
      this.server.closeIdleConnections();
    });
    return this.closing;
  }
}

function clientErrorCode(parserError: string | undefined): HttpErrorCode {
  if (parserError === 'HPE_HEADER_OVERFLOW') return 'HEADERS_TOO_LARGE';
  if (parserError === 'ERR_HTTP_REQUEST_TIMEOUT') return 'REQUEST_TIMEOUT';
  return 'MALFORMED_REQUEST';
}
