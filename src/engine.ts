import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { EngineConfig } from './config/types.js';
import { HttpPipeline } from './http/pipeline.js';
import { HttpServer } from './http/http-server.js';
import type { Invoker } from './invocation/invoker.js';
import { AdminServer } from './observability/admin-server.js';
import { RouteTable } from './routing/route-table.js';
import { LocalInvoker } from './workers/local-invoker.js';
import { WorkerHub } from './workers/worker-hub.js';
import { WorkerServer } from './workers/worker-server.js';

export interface EngineOptions {
  config: EngineConfig;
  logger: Logger;
  /** Serve /healthz and /readyz from this process (single-process mode). */
  serveAdmin?: boolean;
  /** How long in-flight requests may run on close before their connections are cut. */
  drainGraceMs?: number;
}

export interface EnginePorts {
  http: number;
  workers: number;
  admin?: number;
}

type Phase = 'created' | 'starting' | 'running' | 'closing' | 'closed';

const DEFAULT_DRAIN_GRACE_MS = 10_000;

/** One engine process wired together: start() in order, close() in reverse. */
export class Engine {
  readonly table: RouteTable;
  readonly hub: WorkerHub;
  readonly invoker: Invoker;
  private readonly pipeline: HttpPipeline;
  private readonly httpServer: HttpServer;
  private readonly workerServer: WorkerServer;
  private readonly adminServer: AdminServer | undefined;
  private phase: Phase = 'created';
  private closing: Promise<void> | undefined;

  constructor(private readonly options: EngineOptions) {
    const { config, logger } = options;
    this.table = new RouteTable(config.api.ignoreTrailingSlash, config.api.middleware);
    this.hub = new WorkerHub(`local-${randomUUID()}`);
    this.table.setLocalSource(this.hub);
    this.hub.onChange(() => this.table.markChanged());
    this.invoker = new LocalInvoker(this.hub);
    this.workerServer = new WorkerServer(
      config.workers,
      {
        hub: this.hub,
        invoker: this.invoker,
        logger: logger.child({ module: 'workers' }),
        ignoreTrailingSlash: config.api.ignoreTrailingSlash,
        workerCallTimeoutMs: config.api.defaultTimeoutMs,
      },
      logger.child({ module: 'workers' }),
    );
    this.pipeline = new HttpPipeline({
      config: config.api,
      table: this.table,
      invoker: this.invoker,
      logger: logger.child({ module: 'http' }),
    });
    this.httpServer = new HttpServer(config.api, this.pipeline, logger.child({ module: 'http' }));
    if (options.serveAdmin === true) {
      this.adminServer = new AdminServer(
        config.admin,
        {
          ready: () => this.ready(),
          status: () => ({ workers: this.hub.size, routes: this.table.current().router.size }),
        },
        logger.child({ module: 'admin' }),
      );
    }
  }

  ready(): boolean {
    return this.phase === 'running';
  }

  async start(): Promise<EnginePorts> {
    if (this.phase !== 'created') throw new Error(`engine cannot start from phase ${this.phase}`);
    this.phase = 'starting';
    try {
      // Admin first so that /readyz answers 503 while the rest binds.
      const admin = await this.adminServer?.start();
      const workers = await this.workerServer.start();
      const http = await this.httpServer.start();
      this.phase = 'running';
      return admin === undefined ? { http, workers } : { http, workers, admin };
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  /** Drains HTTP, then closes workers with 1001, then admin. Idempotent; keeps going past failures. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.phase = 'closing';
      const grace = this.options.drainGraceMs ?? DEFAULT_DRAIN_GRACE_MS;
      const steps: [string, () => Promise<void>][] = [
        ['http', () => this.httpServer.close(grace)],
        ['workers', () => this.workerServer.close()],
        ['admin', () => this.adminServer?.close() ?? Promise.resolve()],
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
