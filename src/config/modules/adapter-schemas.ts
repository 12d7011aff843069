import { z } from 'zod';

/**
 * The `adapter` entries iii's modules share: `{ name, config }`, with `config` checked per adapter
 * name (iii's closed adapter sets, deny_unknown_fields). Where each adapter keeps its data in a
 * Switchyard cluster: docs/modules.md#where-data-lives.
 */

const saveInterval = () => z.int().min(100).max(3_600_000);

export const kvAdapterConfigSchema = z
  .strictObject({
    store_method: z
      .enum(['in_memory', 'file_based'])
      .optional()
      .describe('`in_memory` (default; lost when the engine stops) or `file_based` (written under `file_path`, survives a restart). In a distributed cluster the data lives in the cluster\'s Redis instead'),
    file_path: z.string().min(1).optional().describe('Directory of the `file_based` store (default `kv_store_data.db`; the file `switchyard-kv.json` inside), relative to the working directory'),
    save_interval_ms: saveInterval().optional().describe('How often (ms) a changed `file_based` store is written; 100-3600000, default 5000'),
  })
  .describe('Built-in key-value store');

export const redisAdapterConfigSchema = z
  .strictObject({
    redis_url: z.string().min(1).optional().describe('Redis URL; default: the cluster\'s `redis_url`, else `redis://localhost:6379`'),
  })
  .describe('Redis');

/** `adapter: { name: kv | redis, config }` for iii-state, iii-stream and iii-cron. */
export function kvOrRedisAdapterSchema(description: string) {
  return z
    .discriminatedUnion('name', [
      z.strictObject({ name: z.literal('kv').describe('The built-in key-value store'), config: kvAdapterConfigSchema.optional() }),
      z.strictObject({ name: z.literal('redis').describe('Redis'), config: redisAdapterConfigSchema.optional() }),
    ])
    .optional()
    .describe(description);
}
