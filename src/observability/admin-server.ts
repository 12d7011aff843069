import { createServer } from 'node:http';
import { listen } from '../net/listen.js';
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { AdminConfig } from '../config/types.js';
import { CONSOLE_HTML, CONSOLE_SCRIPT } from './console-page.js';

export interface AdminProbes {
  /** Listening and able to route. */
  ready(): boolean;
  /** Extra facts for the readiness body. */
  status(): Record<string, unknown>;
  /** Detail for the liveness body (always 200): what is degraded, e.g. the bus during a Redis outage. */
  health?: () => Record<string, unknown>;
  /** GET /routes: the route table with owners. */
  routes?: () => Promise<unknown>;
  /** GET /workers: connected workers with their functions. */
  workers?: () => Promise<unknown>;
  /** GET /metrics: Prometheus text. */
  metrics?: () => Promise<{ contentType: string; body: string }>;
}

/** The console loads only its own script and fetches only this listener. */
const CONSOLE_CSP = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

function asset(res: ServerResponse, contentType: string, body: string): void {
  res.writeHead(200, {
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-cache',
    'content-security-policy': CONSOLE_CSP,
    'x-content-type-options': 'nosniff',
  });
  res.end(body);
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Health (`/healthz`: the process answers), readiness (`/readyz`: send traffic here), the console (`/`) and the views. */
export class AdminServer {
  private readonly server: Server;
  private closing: Promise<void> | undefined;

  constructor(
    private readonly config: AdminConfig,
    probes: AdminProbes,
    private readonly logger: Logger,
  ) {
    this.server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method !== 'GET' && req.method !== 'HEAD') return json(res, 405, { error: 'method not allowed' });
      if (path === '/') return asset(res, 'text/html; charset=utf-8', CONSOLE_HTML);
      if (path === '/console.js') return asset(res, 'text/javascript; charset=utf-8', CONSOLE_SCRIPT);
      if (path === '/healthz') return json(res, 200, { status: 'ok', ...probes.health?.() });
      if (path === '/readyz') {
        const ready = probes.ready();
        return json(res, ready ? 200 : 503, { status: ready ? 'ready' : 'not_ready', ...probes.status() });
      }
      const view = path === '/routes' ? probes.routes : path === '/workers' ? probes.workers : undefined;
      if (view !== undefined) {
        view()
          .then((body) => json(res, 200, body))
          .catch((err: unknown) => json(res, 503, { error: 'unavailable', reason: (err as Error).message }));
        return;
      }
      if (path === '/metrics' && probes.metrics !== undefined) {
        probes
          .metrics()
          .then(({ contentType, body }) => {
            res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
            res.end(body);
          })
          .catch((err: unknown) => json(res, 503, { error: 'unavailable', reason: (err as Error).message }));
        return;
      }
      json(res, 404, { error: 'not found' });
    });
  }

  async start(): Promise<number> {
    await listen(this.server, { port: this.config.port, host: this.config.host });
    const port = (this.server.address() as AddressInfo).port;
    this.logger.info({ host: this.config.host, port }, 'admin listener started');
    return port;
  }

  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
    return this.closing;
  }
}
