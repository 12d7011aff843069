import type { EngineConfig } from '../config/types.js';

/** How a client on this machine reaches a listener bound to `host` (any-address binds → loopback). */
export function localUrl(scheme: string, host: string, port: number, path = ''): string {
  const reachable = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '::1' : host;
  const shown = reachable.includes(':') ? `[${reachable}]` : reachable;
  return `${scheme}://${shown}:${port}${path}`;
}

export interface ReadySummary {
  urls: { http: string; workers: string; console: string };
  next: string;
}

/** The ready line (docs/operations.md#the-first-screen): where to send requests, workers, eyes; one next step. */
export function readySummary(config: EngineConfig, ports: { http: number; workers: number; admin: number }): ReadySummary {
  const urls = {
    http: localUrl('http', config.api.host, ports.http, '/'),
    workers: localUrl('ws', config.workers.host, ports.workers),
    console: localUrl('http', config.admin.host, ports.admin, '/'),
  };
  const next = `connect a worker to ${urls.workers} (examples/README.md), then watch its routes appear in the console`;
  return { urls, next };
}
