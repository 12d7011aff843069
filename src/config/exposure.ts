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
  // Each worker listener: authenticated by auth_token or by an rbac auth function.
  for (const workers of [config.workers, ...config.workers.extraListeners]) {
    if (isLoopback(workers.host) || workers.authToken !== undefined || workers.rbac?.authFunctionId !== undefined) continue;
    out.push({
      listener: 'workers',
      host: workers.host,
      port: workers.port,
      risk:
        workers.rbac === undefined
          ? 'any process that reaches it can register functions and routes; set iii-worker-manager auth_token (or rbac.auth_function_id) or bind it to 127.0.0.1'
          : 'it has rbac but no auth_function_id: any process that reaches it connects (expose_functions still limits what it may call); set rbac.auth_function_id or auth_token',
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
