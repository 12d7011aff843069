import { z } from 'zod';
import { QUEUE_SETTINGS_DEFAULTS } from './queue-config.js';
import type { QueueModuleInput } from './queue-config.js';

/**
 * The `iii-queue` module's config, with iii's keys (engine/src/workers/queue/config.rs at iii 0.22.1):
 * `queue_configs` (named queues) and `adapter`. Kept apart from schema.ts so the queue's settings and
 * their mapping live next to each other; docs/queue.md explains every key. What the engine needs at
 * run time (defaults, QueueConfig, toQueueConfig) is in queue-config.ts, which does not load zod:
 * a cluster child gets the config the primary validated and never parses it again.
 */

const MAX_TIMER_MS = 2_147_483_647;

export const queueSettingsSchema = z
  .strictObject({
    max_retries: z.int().min(0).max(1_000_000).default(QUEUE_SETTINGS_DEFAULTS.max_retries).describe('Delivery attempts before a message goes to the dead-letter store (as iii: the total number of attempts)'),
    concurrency: z.int().min(1).max(100_000).default(QUEUE_SETTINGS_DEFAULTS.concurrency).describe('Messages of this queue processed at once, across the whole cluster (for `fifo`: message groups processed at once)'),
    type: z.enum(['standard', 'fifo']).default(QUEUE_SETTINGS_DEFAULTS.type).describe('`standard` (concurrent, unordered) or `fifo` (in order within a message group)'),
    message_group_field: z.string().min(1).optional().describe('For `fifo`: the payload field whose value is the message group; required for `fifo`'),
    backoff_ms: z.int().min(0).max(MAX_TIMER_MS).default(QUEUE_SETTINGS_DEFAULTS.backoff_ms).describe('Base retry delay: attempt n waits `backoff_ms × 2^(n−1)` ms'),
    poll_interval_ms: z.int().min(1).max(60_000).default(QUEUE_SETTINGS_DEFAULTS.poll_interval_ms).describe('How often an idle consumer looks for new messages where it cannot be woken (the FIFO groups)'),
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

/** The validated section; queue-config.ts declares its shape without zod, and this fails to compile if the two part. */
export type QueueModuleOutput = z.output<typeof queueModuleSchema>;
export const toQueueModuleInput: (output: QueueModuleOutput) => QueueModuleInput = (output) => output;
