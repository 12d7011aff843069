import type { EngineConfig } from './types.js';

/** A listener that anyone who can reach its address may use: the engine warns about each at start. */
export interface ExposedListener {
  listener: 'workers' | 'admin';
  host: string;
  port: number;
  risk: string;
}

/** Loopback addresses (and the name that means them): reachable from this host only. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h) || h === '::ffff:127.0.0.1';
}

/**
 * Listeners bound beyond loopback with no authentication: the worker port without `auth_token` (any
 * process that reaches it registers routes), and the admin port (it has none: health, readiness,
 * metrics, the route and worker tables). The HTTP port is the public API and is not listed.
 */
export function exposedListeners(config: EngineConfig): ExposedListener[] {
  const out: ExposedListener[] = [];
  if (!isLoopback(config.workers.host) && config.workers.authToken === undefined) {
    out.push({
      listener: 'workers',
      host: config.workers.host,
      port: config.workers.port,
      risk: 'any process that reaches it can register functions and routes; set iii-worker-manager auth_token or bind it to 127.0.0.1',
    });
  }
  if (!isLoopback(config.admin.host)) {
    out.push({
      listener: 'admin',
      host: config.admin.host,
      port: config.admin.port,
      risk: 'it has no authentication: metrics, routes and workers are readable by anyone who reaches it; keep it on a private network',
    });
  }
  return out;
}
