import { z } from 'zod';
import { redisAdapterConfigSchema } from './adapter-schemas.js';

/** iii-pubsub's config (docs/pubsub.md). */
export const pubsubModuleSchema = z
  .strictObject({
    adapter: z
      .discriminatedUnion('name', [
        z.strictObject({ name: z.literal('local').describe('In the engine'), config: z.strictObject({}).optional().describe('No keys') }),
        z.strictObject({ name: z.literal('redis').describe('Redis'), config: redisAdapterConfigSchema.optional() }),
      ])
      .optional()
      .describe('`local` (default) or `redis`. Either way a publish reaches every subscriber in the cluster (docs/pubsub.md)'),
  })
  .describe('Topic publish/subscribe: the `publish` function and the `subscribe` trigger type');

export type PubSubModuleInput = z.output<typeof pubsubModuleSchema>;
