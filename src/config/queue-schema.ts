import { z } from 'zod';

/**
 * The `iii-queue` module's config, with iii's keys (engine/src/workers/queue/config.rs at iii 0.22.1):
 * `queue_configs` (named queues) and `adapter`. Kept apart from schema.ts so the queue's settings and
 * their mapping live next to each other; docs/queue.md explains every key.
 */

const MAX_TIMER_MS = 2_147_483_647;

export const queueSettingsSchema = z
  .strictObject({
    max_retries: z.int().min(0).max(1_000_000).default(3).describe('Delivery attempts before a message goes to the dead-letter store (as iii: the total number of attempts)'),
    concurrency: z.int().min(1).max(100_000).default(10).describe('Messages of this queue processed at once, across the whole cluster (for `fifo`: message groups processed at once)'),
    type: z.enum(['standard', 'fifo']).default('standard').describe('`standard` (concurrent, unordered) or `fifo` (in order within a message group)'),
    message_group_field: z.string().min(1).optional().describe('For `fifo`: the payload field whose value is the message group; required for `fifo`'),
    backoff_ms: z.int().min(0).max(MAX_TIMER_MS).default(1000).describe('Base retry delay: attempt n waits `backoff_ms × 2^(n−1)` ms'),
    poll_interval_ms: z.int().min(1).max(60_000).default(100).describe('How often an idle consumer looks for new messages where it cannot be woken (the FIFO groups)'),
    max_priority: z.int().min(1).max(255).optional().describe('RabbitMQ-only in iii; accepted and ignored'),
    priority_field: z.string().min(1).optional().describe('RabbitMQ-only in iii; accepted and ignored'),
  })
  .refine((q) => q.type !== 'fifo' || q.message_group_field !== undefined, {
    error: 'is of type fifo but message_group_field is not set',
  })
  .describe('One named queue');

const builtinAdapterSchema = z.strictObject({
  name: z.literal('builtin'),
  config: z
    .strictObject({
      store_method: z.enum(['in_memory', 'file_based']).optional().describe('`in_memory` keeps messages for the engine\'s lifetime, `file_based` also writes them under `file_path`'),
      file_path: z.string().min(1).optional().describe('Directory of the file-based store'),
      save_interval_ms: z.int().min(100).max(3_600_000).optional().describe('Accepted for iii compatibility; every change is written at once'),
    })
    .optional(),
});

const redisAdapterSchema = z.strictObject({
  name: z.literal('redis'),
  config: z.strictObject({ redis_url: z.string().min(1).optional().describe('Redis URL of the queue store') }).optional(),
});

export const queueModuleSchema = z
  .strictObject({
    queue_configs: z.record(z.string().min(1), queueSettingsSchema).default({}).describe('Named queues by name; a `default` queue is always there'),
    adapter: z
      .discriminatedUnion('name', [builtinAdapterSchema, redisAdapterSchema])
      .optional()
      .describe('Where messages are kept: `builtin` (embedded, held by the primary) or `redis`; unset: the cluster\'s Redis when it has one, otherwise `builtin`'),
  })
  .describe('Queues behind TriggerAction.Enqueue and durable topics (iii-queue), docs/queue.md');

export type QueueModuleInput = z.output<typeof queueModuleSchema>;

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
  const parsed = input ?? queueModuleSchema.parse({});
  const queues = new Map<string, QueueSettings>();
  const entries = Object.entries(parsed.queue_configs);
  if (!entries.some(([name]) => name === DEFAULT_QUEUE_NAME)) entries.push([DEFAULT_QUEUE_NAME, queueSettingsSchema.parse({})]);
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
