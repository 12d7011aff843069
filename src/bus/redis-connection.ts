import { Redis } from 'ioredis';
import type { RedisOptions } from 'ioredis';

const COMMAND_TIMEOUT_MS = 5_000;
const CONNECT_TIMEOUT_MS = 5_000;
const QUIT_TIMEOUT_MS = 1_000;

/**
 * One ioredis connection as the bus wants it: connected explicitly, no offline queue (a command
 * issued while disconnected fails at once, and in-flight ones fail when the link drops: after an
 * outage nothing stale is replayed, the bus rewrites its newest state on 'ready'), no automatic
 * resubscribe (the bus resubscribes and then reloads), bounded commands.
 */
export function createRedisConnection(url: string, name: string, heartbeatMs: number, tlsCa?: string): Redis {
  // Reconnect at least as often as peers heartbeat, so a restarted Redis is refilled within a lease.
  const maxDelayMs = Math.min(Math.max(heartbeatMs, 50), 2_000);
  const options: RedisOptions = {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    autoResubscribe: false,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: CONNECT_TIMEOUT_MS,
    retryStrategy: (attempt: number) => Math.min(25 * 2 ** Math.min(attempt, 10), maxDelayMs),
    connectionName: `switchyard:${name}`,
  };
  // rediss:// is TLS (ioredis reads user and password from the URL: an ACL user authenticates with both).
  if (url.startsWith('rediss://')) options.tls = tlsCa === undefined ? {} : { ca: tlsCa };
  return new Redis(url, options);
}

/** QUIT when connected (bounded), then drop the socket and stop reconnecting in any case. */
export async function quitConnection(connection: Redis): Promise<void> {
  if (connection.status === 'ready') await withDeadline(connection.quit(), QUIT_TIMEOUT_MS).catch(() => undefined);
  connection.disconnect();
}

export function withDeadline<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no reply within ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** The URL without its password, for logs and errors. */
export function redactRedisUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparseable Redis URL)';
  }
}
