import { createHash } from 'node:crypto';
import { unlinkSync } from 'node:fs';
import { hostname, networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { EngineConfig } from '../config/types.js';
import { Engine } from '../engine.js';
import type { Bus } from './bus.js';
import type { AdminAnswerMessage, ChildBootstrap, ChildFatalMessage, ChildStatusMessage } from './child-messages.js';
import { isAdminQuery, isShutdown } from './child-messages.js';
import { IpcBus } from './ipc-bus.js';
import { processChannel } from './ipc-channel.js';
import type { PeerIdentity } from './peer-id.js';
import { peerIdentity } from './peer-id.js';

const STATUS_POLL_MS = 250;

/** Unix socket paths are limited to ~107 bytes: name the socket after a hash of the peer id. */
export function forwardSocketPath(peerId: string): string {
  return join(tmpdir(), `switchyard-${createHash('sha256').update(peerId).digest('hex').slice(0, 20)}.sock`);
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
  return { ...config, api: { ...config.api, concurrencyRequestLimit: share } };
}

/** ioredis is loaded only in distributed mode: an embedded child saves ~9 MB of RSS without it. */
async function makeBus(config: EngineConfig, identity: PeerIdentity, logger: Logger): Promise<Bus> {
  const { redisUrl, name, heartbeatMs, leaseMs } = config.cluster;
  if (redisUrl === undefined) return new IpcBus(processChannel(), identity.peerId, name, logger);
  const { RedisBus } = await import('./redis-bus.js');
  return new RedisBus({ url: redisUrl, cluster: name, peerId: identity.peerId, heartbeatMs, leaseMs, logger });
}

/**
 * A node:cluster child: one engine process. It reports its status to the primary, drains when the
 * primary says so, and exits when the primary is gone (no orphans).
 */
export async function runChild(bootstrap: ChildBootstrap, rootLogger: Logger): Promise<void> {
  const identity = peerIdentity(bootstrap.nodeId, bootstrap.index);
  const logger = rootLogger.child({ peerId: identity.peerId });
  const config = childConfig(bootstrap.config);
  const socketPath = forwardSocketPath(identity.peerId);
  const { redisUrl, forwardPort, advertiseHost } = config.cluster;
  const engine = new Engine({
    config,
    logger,
    servedByHeader: process.env.SWITCHYARD_SERVED_BY_HEADER === '1',
    cluster: {
      identity,
      bus: await makeBus(config, identity, logger.child({ module: 'bus' })),
      secret: bootstrap.secret,
      clusterName: config.cluster.name,
      socketPath,
      ...(redisUrl === undefined
        ? {}
        : {
            tcp: {
              bindHost: '0.0.0.0',
              // A fixed forward_port is the first child's; child i listens on forward_port + i.
              port: forwardPort === undefined || forwardPort === 0 ? 0 : forwardPort + bootstrap.index,
              advertiseHost: advertiseHost ?? defaultAdvertiseHost(),
            },
          }),
    },
  });

  let exiting = false;
  const exit = (code: number, why: string): void => {
    if (exiting) return;
    exiting = true;
    logger.info({ why }, 'child stopping');
    clearInterval(poll);
    engine
      .close()
      .catch((err: unknown) => logger.error({ err }, 'child close failed'))
      .finally(() => {
        try {
          unlinkSync(socketPath);
        } catch {
          // already removed by the listener's close
        }
        logger.flush();
        process.exit(code);
      });
  };
  // The primary coordinates shutdown: a terminal's Ctrl-C reaches the whole process group.
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => exit(0, 'SIGTERM'));
  process.on('disconnect', () => exit(0, 'primary gone'));
  process.on('message', (message: unknown) => {
    if (isShutdown(message)) exit(0, 'primary asked to shut down');
    else if (isAdminQuery(message) && process.connected) {
      const data = message.what === 'routes' ? engine.routesView() : engine.workersView();
      const answer: AdminAnswerMessage = { sy: 'admin-answer', id: message.id, data };
      process.send?.(answer);
    }
  });

  let last = '';
  let ports: ChildStatusMessage['ports'] | undefined;
  // Sent on change only: readiness, connected workers, routes in the table.
  const report = (): void => {
    if (ports === undefined || exiting) return;
    const ready = engine.ready();
    const workers = engine.hub.size;
    const routes = engine.table.current().router.size;
    const key = `${String(ready)}/${workers}/${routes}`;
    if (key === last) return;
    last = key;
    const status: ChildStatusMessage = { sy: 'status', index: bootstrap.index, peerId: identity.peerId, ready, ports, workers, routes };
    if (process.connected) process.send?.(status);
  };
  const poll = setInterval(report, STATUS_POLL_MS);
  try {
    ports = await engine.start();
  } catch (err) {
    logger.fatal({ err }, 'child failed to start');
    const failure = err as NodeJS.ErrnoException & { address?: string; port?: number };
    // In a cluster child the primary binds the shared ports, so the failure may say bind or listen.
    const bindFailed = failure.syscall === 'listen' || failure.syscall === 'bind';
    const fatal: ChildFatalMessage = {
      sy: 'fatal',
      index: bootstrap.index,
      code: bindFailed ? 'LISTEN_FAILED' : 'START_FAILED',
      message:
        bindFailed
          ? `cannot bind ${failure.address ?? '?'}:${failure.port ?? '?'} (${failure.code ?? failure.message})`
          : failure.message,
    };
    if (process.connected) process.send?.(fatal);
    exit(1, 'start failed');
    return;
  }
  report();
}
