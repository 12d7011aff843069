import { createHash } from 'node:crypto';
import { readFileSync, unlinkSync } from 'node:fs';
import { hostname, networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Bus } from '../bus/bus.js';
import { IpcBus } from '../bus/ipc-bus.js';
import type { IpcChannel } from '../bus/ipc-channel.js';
import type { PeerIdentity } from '../cluster/peer-id.js';
import { peerIdentity } from '../cluster/peer-id.js';
import type { EngineConfig } from '../config/types.js';
import { Engine } from '../engine.js';
import type { AdminAnswerMessage, ChildBootstrap, ChildFatalMessage, ChildStatusMessage } from './child-messages.js';
import { isAdminQuery, isShutdown } from './child-messages.js';
import { StreamHeapGrowth } from '../http/stream-heap.js';

const STATUS_POLL_MS = 250;
/**
 * Connected workers and routes change all the time under worker churn; they are sent at most this
 * often (readiness and bus sync at once, on the next poll). Each report is an IPC write that wakes the
 * primary: at 32 single-process nodes on 2 cores, four a second were 2.8 % of a child's CPU.
 */
const COUNTS_REPORT_MS = 1000;

/** Unix socket paths are limited to ~107 bytes: name the socket after a hash of the peer id. */
export function forwardSocketPath(peerId: string): string {
  // In a directory of this user's own, mode 0700 (forward-listen.ts privateDirectory).
  const owner = process.getuid?.() ?? 'user';
  return join(tmpdir(), `switchyard-${owner}`, `${createHash('sha256').update(peerId).digest('hex').slice(0, 20)}.sock`);
}

/**
 * Default address peers of other hosts dial: this host's first non-internal IPv4 address (a container's
 * or pod's own IP), else its host name. A container's host name is its id, which other containers
 * cannot resolve, so the IP is the better default; set advertise_host when neither is reachable.
 */
export function defaultAdvertiseHost(): string {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const address of addresses ?? []) {
      if (address.family === 'IPv4' && !address.internal) return address.address;
    }
  }
  return hostname();
}

/** The concurrency limit is per engine node; each child enforces its share. */
function childConfig(config: EngineConfig): EngineConfig {
  const share = Math.max(1, Math.ceil(config.api.concurrencyRequestLimit / config.cluster.processes));
  const queueShare = Math.ceil(config.api.concurrencyQueueLimit / config.cluster.processes);
  return { ...config, api: { ...config.api, concurrencyRequestLimit: share, concurrencyQueueLimit: queueShare } };
}

/** ioredis is loaded only in distributed mode: an embedded child saves ~9 MB of RSS without it. */
async function makeBus(config: EngineConfig, identity: PeerIdentity, channel: IpcChannel, logger: Logger, secret: string): Promise<Bus> {
  const { redisUrl, name, heartbeatMs, leaseMs } = config.cluster;
  if (redisUrl === undefined) return new IpcBus(channel, identity.peerId, name, logger);
  const { RedisBus } = await import('../bus/redis-bus.js');
  const tlsCa = config.cluster.redisTlsCaFile === undefined ? undefined : readFileSync(config.cluster.redisTlsCaFile, 'utf8');
  return new RedisBus({ url: redisUrl, cluster: name, secret, peerId: identity.peerId, heartbeatMs, leaseMs, logger, ...(tlsCa === undefined ? {} : { tlsCa }) });
}

export interface ChildEngineOptions {
  /** The IPC link to the primary: bus traffic (embedded mode), status, admin queries. */
  channel: IpcChannel;
  /** Add the x-switchyard-served-by response header (debugging, benchmarks). */
  servedByHeader: boolean;
  /** The process environment: HTTP-invoked functions read their auth secrets from it. */
  env?: Readonly<Record<string, string | undefined>>;
  /** This process's Node.js and V8 flags (`process.execArgv`): the heap growing factor a large stream may raise. */
  execArgv?: readonly string[];
  /** This process's id: labels the series that must stay apart once the primary sums the children's metrics. */
  pid?: number;
}

/** Which status reports go to the primary: a change of readiness at once, of the counts at most every `countsEveryMs`. */
export class StatusReports {
  private last = '';
  private lastReadiness = '';
  private lastAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly countsEveryMs = COUNTS_REPORT_MS) {}

  due(readiness: string, counts: string, nowMs: number): boolean {
    const key = `${readiness}/${counts}`;
    if (key === this.last) return false;
    if (readiness === this.lastReadiness && nowMs - this.lastAt < this.countsEveryMs) return false;
    this.last = key;
    this.lastReadiness = readiness;
    this.lastAt = nowMs;
    return true;
  }
}

/**
 * One node:cluster child's engine and its conversation with the primary: status reports on change,
 * admin queries answered from the table. The process around it (signals, exit) is src/cli/child.ts.
 */
export class ChildEngine {
  readonly identity: PeerIdentity;
  private readonly logger: Logger;
  private readonly socketPath: string;
  private engine: Engine | undefined;
  private poll: NodeJS.Timeout | undefined;
  private ports: ChildStatusMessage['ports'] | undefined;
  private readonly reports = new StatusReports();
  private stopped = false;
  private closing: Promise<void> | undefined;

  constructor(
    private readonly bootstrap: ChildBootstrap,
    rootLogger: Logger,
    private readonly options: ChildEngineOptions,
  ) {
    this.identity = peerIdentity(bootstrap.nodeId, bootstrap.index);
    this.logger = rootLogger.child({ peerId: this.identity.peerId });
    this.socketPath = forwardSocketPath(this.identity.peerId);
  }

  get log(): Logger {
    return this.logger;
  }

  /** Builds and starts the engine; on failure tells the primary why and returns the fatal message. */
  async start(): Promise<ChildFatalMessage | undefined> {
    const config = childConfig(this.bootstrap.config);
    const { redisUrl, forwardPort, advertiseHost } = config.cluster;
    const engine = new Engine({
      config,
      logger: this.logger,
      servedByHeader: this.options.servedByHeader,
      ...(this.options.pid === undefined ? {} : { pid: this.options.pid }),
      ...streamHeapOption(config.cluster.streamHeapGrowingPercent, this.options.execArgv),
      ...(this.options.env === undefined ? {} : { env: this.options.env }),
      primary: this.options.channel,
      cluster: {
        identity: this.identity,
        bus: await makeBus(config, this.identity, this.options.channel, this.logger.child({ module: 'bus' }), this.bootstrap.secret),
        secret: this.bootstrap.secret,
        clusterName: config.cluster.name,
        socketPath: this.socketPath,
        ...(redisUrl === undefined
          ? {}
          : {
              ...(config.cluster.forwardTls === undefined
                ? {}
                : {
                    tls: {
                      cert: readFileSync(config.cluster.forwardTls.certFile, 'utf8'),
                      key: readFileSync(config.cluster.forwardTls.keyFile, 'utf8'),
                      ca: readFileSync(config.cluster.forwardTls.caFile, 'utf8'),
                    },
                  }),
              tcp: {
                bindHost: '0.0.0.0',
                // A fixed forward_port is the first child's; child i listens on forward_port + i.
                port: forwardPort === undefined || forwardPort === 0 ? 0 : forwardPort + this.bootstrap.index,
                advertiseHost: advertiseHost ?? defaultAdvertiseHost(),
              },
            }),
      },
    });
    this.engine = engine;
    this.poll = setInterval(() => this.report(), STATUS_POLL_MS);
    try {
      this.ports = await engine.start();
    } catch (err) {
      this.logger.fatal({ err }, 'child failed to start');
      const failure = err as NodeJS.ErrnoException & { address?: string; port?: number };
      // In a cluster child the primary binds the shared ports, so the failure may say bind or listen.
      const bindFailed = failure.syscall === 'listen' || failure.syscall === 'bind';
      const fatal: ChildFatalMessage = {
        sy: 'fatal',
        index: this.bootstrap.index,
        code: bindFailed ? 'LISTEN_FAILED' : 'START_FAILED',
        message: bindFailed ? `cannot bind ${failure.address ?? '?'}:${failure.port ?? '?'} (${failure.code ?? failure.message})` : failure.message,
      };
      this.options.channel.send(fatal);
      return fatal;
    }
    this.report();
    return undefined;
  }

  /** A message from the primary: answers admin queries; returns 'shutdown' when asked to stop. */
  onPrimaryMessage(message: unknown): 'shutdown' | undefined {
    if (isShutdown(message)) return 'shutdown';
    if (isAdminQuery(message) && this.engine !== undefined) {
      const data = message.what === 'routes' ? this.engine.routesView() : this.engine.workersView();
      const answer: AdminAnswerMessage = { sy: 'admin-answer', id: message.id, data };
      this.options.channel.send(answer);
    }
    return undefined;
  }

  /** Stops reporting, closes the engine and removes the forward socket file. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.stopped = true;
      clearInterval(this.poll);
      try {
        await this.engine?.close();
      } finally {
        try {
          unlinkSync(this.socketPath);
        } catch {
          // already removed by the listener's close
        }
      }
    })();
    return this.closing;
  }

  /** Sent on change only: readiness, bus sync, connected workers, routes in the table. */
  private report(): void {
    const engine = this.engine;
    if (this.ports === undefined || this.stopped || engine === undefined) return;
    const ready = engine.ready();
    const busSynced = engine.busSynced();
    const workers = engine.hub.size;
    const routes = engine.table.current().router.size;
    if (!this.reports.due(`${String(ready)}/${String(busSynced)}`, `${workers}/${routes}`, performance.now())) return;
    const status: ChildStatusMessage = { sy: 'status', index: this.bootstrap.index, peerId: this.identity.peerId, ready, busSynced, ports: this.ports, workers, routes };
    this.options.channel.send(status);
  }
}

/** The engine option that raises the child's heap growing factor while large bodies stream, when it applies. */
function streamHeapOption(raisedPercent: number, execArgv: readonly string[] | undefined): { streamHeap?: StreamHeapGrowth } {
  const control = execArgv === undefined ? undefined : StreamHeapGrowth.forProcess(raisedPercent, execArgv);
  return control === undefined ? {} : { streamHeap: control };
}
