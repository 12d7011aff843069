import { createServer } from 'node:http';
import { listen } from '../net/listen.js';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { ApiConfig } from '../config/types.js';
import type { HttpPipeline } from './pipeline.js';

/** Headers must arrive within this (slowloris bound), whatever the request deadline. */
const HEADERS_TIMEOUT_MS = 10_000;
const MAX_HEADER_BYTES = 16 * 1024;

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
        maxHeaderSize: MAX_HEADER_BYTES,
        keepAliveTimeout: 5000,
      },
      pipeline.handle,
    );
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
      if (!socket.writable) return socket.destroy();
      const status = err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request';
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    });
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
