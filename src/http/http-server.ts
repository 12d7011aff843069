import { createServer, STATUS_CODES } from 'node:http';
import { listen } from '../net/listen.js';
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { ApiConfig } from '../config/types.js';
import type { HttpErrorCode } from '../errors.js';
import type { HttpPipeline } from './pipeline.js';
import { resolveRequestId } from './request-id.js';
import { errorReply } from './response.js';

/** Headers must arrive within this (slowloris bound), whatever the request deadline. */
const HEADERS_TIMEOUT_MS = 10_000;
const MAX_HEADER_BYTES = 16 * 1024;
/**
 * How often Node checks headersTimeout and requestTimeout. Its default (30 s) let a client trickling
 * headers hold a connection for up to 30 s whatever headersTimeout said; once a second keeps the
 * bound within a second of what docs/http.md promises, for one pass over the open connections.
 */
const TIMEOUT_CHECK_INTERVAL_MS = 1000;

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
        // The pipeline answers a slow body itself (408) within the deadline; this is the backstop.
        requestTimeout: config.defaultTimeoutMs + 5000,
        connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
        maxHeaderSize: MAX_HEADER_BYTES,
        keepAliveTimeout: 5000,
      },
      pipeline.handle,
    );
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => this.refuse(err, socket));
  }

  /**
   * What Node's parser refuses before the pipeline sees a request (bad framing, smuggling attempts,
   * oversized or late headers) is answered with the engine's error envelope and the connection is
   * closed, so nothing after the refused bytes is ever parsed as another request.
   */
  private refuse(err: NodeJS.ErrnoException, socket: Duplex): void {
    // As Node's own handler: never write into a response that is already on the wire.
    const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage;
    if (!socket.writable || err.code === 'ECONNRESET' || inFlight?.headersSent === true) {
      socket.destroy();
      return;
    }
    const code = clientErrorCode(err.code);
    const requestId = resolveRequestId(undefined);
    const message = code === 'REQUEST_TIMEOUT' ? 'Request headers were not received in time' : undefined;
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
    this.logger.debug({ parserError: err.code, code, requestId }, 'request refused before parsing completed');
  }

  async start(): Promise<number> {
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
