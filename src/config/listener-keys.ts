import { MODULE_NAMES } from './schema.js';
import type { EngineConfig } from './types.js';

/**
 * The config key that sets the listener bound to `port` (for the "port in use" error), or undefined
 * when no listener of this config asked for that port (port 0 picks a free one and never collides).
 */
export function listenerKeyForPort(config: EngineConfig, port: number): string | undefined {
  if (port === 0) return undefined;
  const keys: [number | undefined, string][] = [
    [config.api.port, `${MODULE_NAMES.api} port`],
    [config.workers.port, `${MODULE_NAMES.workers} port`],
    ...config.workers.extraListeners.map((listener, i): [number, string] => [listener.port, `${MODULE_NAMES.workers} port (listener ${i + 2})`]),
    [config.admin.port, `${MODULE_NAMES.admin} port`],
  ];
  const forward = config.cluster.forwardPort;
  if (forward !== undefined && forward !== 0 && port >= forward && port < forward + config.cluster.processes) keys.push([port, `${MODULE_NAMES.cluster} forward_port`]);
  return keys.find(([bound]) => bound === port)?.[1];
}

/** "cannot bind HOST:PORT (EADDRINUSE)" plus which key to change, for LISTEN_FAILED messages. */
export function explainBindFailure(config: EngineConfig, message: string): string {
  const match = /:(\d+) \((EADDRINUSE|EACCES)\)/.exec(message);
  const port = match?.[1] === undefined ? undefined : Number(match[1]);
  const key = port === undefined ? undefined : listenerKeyForPort(config, port);
  if (key === undefined) return message;
  const why = match?.[2] === 'EACCES' ? 'needs privileges on this machine' : 'is in use by another process';
  return `${message}: port ${port} ${why}; set ${key} to another port (or stop what holds it)`;
}
