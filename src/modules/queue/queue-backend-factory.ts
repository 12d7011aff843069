import { resolve } from 'node:path';
import type { Logger } from 'pino';
import type { IpcChannel } from '../../bus/ipc-channel.js';
import type { QueueConfig } from '../../config/queue-config.js';
import { DEFAULT_QUEUE_FILE_PATH } from '../../config/queue-config.js';
import { EmbeddedQueueStore } from './embedded-store.js';
import { IpcQueueStore } from './embedded-queue-link.js';
import type { QueueBackend } from './queue-backend.js';
import { RedisBackend, StoreBackend } from './queue-backend.js';
import { RedisFifoStore } from './redis-fifo-store.js';

/** iii's default for the queue's `redis` adapter without a `redis_url`. */
const DEFAULT_REDIS_URL = 'redis://localhost:6379';

export interface QueueBackendContext {
  clusterName: string;
  /** The cluster's Redis (switchyard-cluster `redis_url`), when it has one. */
  clusterRedisUrl?: string;
  /** A cluster child's link to the primary, which holds the embedded store. */
  primary?: IpcChannel;
  logger: Logger;
}

export type QueuePlacement = { kind: 'redis'; url: string } | { kind: 'embedded'; dir: string | undefined };

/** Where the queue's messages live for this config (docs/queue.md#storage); a relative path is the working directory's. */
export function queuePlacement(config: QueueConfig, clusterRedisUrl: string | undefined): QueuePlacement {
  const { storage } = config;
  if (storage.kind === 'redis') return { kind: 'redis', url: storage.redisUrl ?? clusterRedisUrl ?? DEFAULT_REDIS_URL };
  if (storage.kind === 'auto' && clusterRedisUrl !== undefined) return { kind: 'redis', url: clusterRedisUrl };
  const file = storage.kind === 'builtin' ? storage.filePath : DEFAULT_QUEUE_FILE_PATH;
  return { kind: 'embedded', dir: file === undefined ? undefined : resolve(file) };
}

export interface CreatedBackend {
  backend: QueueBackend;
  brokerType: 'builtin' | 'redis';
  /** Closes what the backend does not own (the Redis connection, an in-process store). */
  release(): Promise<void>;
}

/** The backend for one engine process; BullMQ is loaded only when the queue is on Redis. */
export async function createQueueBackend(config: QueueConfig, context: QueueBackendContext): Promise<CreatedBackend> {
  const placement = queuePlacement(config, context.clusterRedisUrl);
  if (placement.kind === 'redis') {
    // Loaded here, like BullMQ: a child whose queue is not on Redis never loads ioredis.
    const { Redis } = await import('ioredis');
    const connection = new Redis(placement.url, {
      // BullMQ's workers block on the connection and need commands to wait out a reconnect.
      maxRetriesPerRequest: null,
      connectionName: 'switchyard:queue',
      ...(placement.url.startsWith('rediss://') ? { tls: {} } : {}),
    });
    connection.on('error', (err: Error) => context.logger.warn({ err: err.message }, 'queue Redis connection error'));
    const prefix = `${context.clusterName}:queue`;
    const { BullMqLanes } = await import('./bullmq-lanes.js');
    const backend = new RedisBackend(new BullMqLanes(connection, `${prefix}:bq`, context.logger), new RedisFifoStore(connection, prefix), context.logger);
    return {
      backend,
      brokerType: 'redis',
      release: async () => {
        await connection.quit().catch(() => undefined);
        connection.disconnect();
      },
    };
  }
  // Embedded: in a cluster the primary holds the one copy; a lone engine process holds it itself.
  const store = context.primary !== undefined ? new IpcQueueStore(context.primary) : EmbeddedQueueStore.open(placement.dir, context.logger);
  return { backend: new StoreBackend(store, context.logger), brokerType: 'builtin', release: () => store.close() };
}
