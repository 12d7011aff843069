/**
 * The `iii-queue` config as the engine uses it at run time, without zod: queue-schema.ts validates the
 * file once, in the primary, and every process (cluster children included) maps the validated input
 * with toQueueConfig. A child's import path must not reach queue-schema.ts (test/integration/child-footprint.test.ts).
 */

/** The keys of one named queue after validation (queue-schema.ts: queueSettingsSchema's output). */
export interface QueueSettingsInput {
  max_retries: number;
  concurrency: number;
  type: 'standard' | 'fifo';
  message_group_field?: string | undefined;
  backoff_ms: number;
  poll_interval_ms: number;
  max_priority?: number | undefined;
  priority_field?: string | undefined;
}

/** The `iii-queue` section after validation (queue-schema.ts: queueModuleSchema's output). */
export interface QueueModuleInput {
  queue_configs: Record<string, QueueSettingsInput>;
  adapter?:
    | { name: 'builtin'; config?: { store_method?: 'in_memory' | 'file_based' | undefined; file_path?: string | undefined; save_interval_ms?: number | undefined } | undefined }
    | { name: 'redis'; config?: { redis_url?: string | undefined } | undefined }
    | undefined;
}

/** A named queue's settings where the file leaves them out (queue-schema.ts applies the same). */
export const QUEUE_SETTINGS_DEFAULTS = {
  max_retries: 3,
  concurrency: 10,
  type: 'standard',
  backoff_ms: 1000,
  poll_interval_ms: 100,
} as const satisfies QueueSettingsInput;

/** One named queue, in code's vocabulary. */
export interface QueueSettings {
  readonly name: string;
  /** Total delivery attempts before the dead-letter store (iii's `max_retries`). */
  readonly maxAttempts: number;
  /** Cluster-wide: messages (standard) or message groups (fifo) in flight at once. */
  readonly concurrency: number;
  readonly fifo: boolean;
  readonly messageGroupField?: string;
  readonly backoffMs: number;
  readonly pollIntervalMs: number;
}

/**
 * Where messages live. `auto` (no `adapter` in the file): the cluster's Redis when it has one,
 * otherwise the embedded store written under `./data/queue_store`, so that a restart loses nothing.
 */
export type QueueStorage =
  | { kind: 'auto' }
  | { kind: 'builtin'; filePath?: string }
  | { kind: 'redis'; redisUrl?: string };

export const DEFAULT_QUEUE_FILE_PATH = './data/queue_store';

export interface QueueConfig {
  readonly queues: ReadonlyMap<string, QueueSettings>;
  /** Where messages live; a `redis` without `redisUrl` means the cluster's own Redis. */
  readonly storage: QueueStorage;
  /** Whether the file had an `iii-queue` entry (the queue's engine functions are served either way). */
  readonly configured: boolean;
}

export const DEFAULT_QUEUE_NAME = 'default';

/** The `iii-queue` input mapped to `QueueConfig`; the `default` queue is added when the file has none. */
export function toQueueConfig(input: QueueModuleInput | undefined): QueueConfig {
  const parsed: QueueModuleInput = input ?? { queue_configs: {} };
  const queues = new Map<string, QueueSettings>();
  const entries: [string, QueueSettingsInput][] = Object.entries(parsed.queue_configs);
  if (!entries.some(([name]) => name === DEFAULT_QUEUE_NAME)) entries.push([DEFAULT_QUEUE_NAME, { ...QUEUE_SETTINGS_DEFAULTS }]);
  for (const [name, q] of entries) {
    queues.set(name, {
      name,
      maxAttempts: Math.max(1, q.max_retries),
      concurrency: q.concurrency,
      fifo: q.type === 'fifo',
      ...(q.type === 'fifo' && q.message_group_field !== undefined ? { messageGroupField: q.message_group_field } : {}),
      backoffMs: q.backoff_ms,
      pollIntervalMs: q.poll_interval_ms,
    });
  }
  const adapter = parsed.adapter;
  let storage: QueueStorage;
  if (adapter?.name === 'redis') storage = { kind: 'redis', ...(adapter.config?.redis_url === undefined ? {} : { redisUrl: adapter.config.redis_url }) };
  else if (adapter?.name === 'builtin') {
    // iii's default is in_memory; an explicit file_path without store_method also means the file.
    const inMemory = adapter.config?.store_method === 'in_memory' || (adapter.config?.store_method === undefined && adapter.config?.file_path === undefined);
    const file = inMemory ? undefined : (adapter.config?.file_path ?? DEFAULT_QUEUE_FILE_PATH);
    storage = { kind: 'builtin', ...(file === undefined ? {} : { filePath: file }) };
  } else storage = { kind: 'auto' };
  return { queues, storage, configured: input !== undefined };
}
