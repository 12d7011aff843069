import { z } from 'zod';
import { kvAdapterConfigSchema, redisAdapterConfigSchema } from './adapter-schemas.js';

/** iii-cron's config (docs/cron.md). */
export const cronModuleSchema = z
  .strictObject({
    adapter: z
      .discriminatedUnion('name', [
        z.strictObject({
          name: z.literal('kv').describe('Locks held by the engine'),
          config: kvAdapterConfigSchema
            .extend({
              lock_ttl_ms: z.int().min(1).optional().describe('Accepted for iii compatibility; Switchyard\'s lease is switchyard-cluster `lease_ms`'),
              lock_index: z.string().min(1).optional().describe('Accepted for iii compatibility; unused'),
            })
            .optional()
            .describe("iii's kv adapter keys, accepted; the locks are the cluster's leases (docs/cron.md)"),
        }),
        z.strictObject({ name: z.literal('redis').describe('Locks in Redis'), config: redisAdapterConfigSchema.optional() }),
      ])
      .optional()
      .describe('Where the lock that makes a tick fire once is kept. Either way Switchyard fires each tick once per cluster (docs/cron.md)'),
  })
  .describe('Scheduled triggers: the `cron` trigger type');

export type CronModuleInput = z.output<typeof cronModuleSchema>;
