import { cronModuleSchema } from './cron-schema.js';
import { pubsubModuleSchema } from './pubsub-schema.js';
import { queueModuleSchema } from '../queue-schema.js';
import { stateModuleSchema } from './state-schema.js';
import { streamModuleSchema } from './stream-schema.js';

/** iii's other modules, by their names in the `workers:` list, each with its config schema. */
export const III_MODULE_SCHEMAS = {
  'iii-state': stateModuleSchema,
  'iii-stream': streamModuleSchema,
  'iii-pubsub': pubsubModuleSchema,
  'iii-cron': cronModuleSchema,
  'iii-queue': queueModuleSchema,
} as const;
