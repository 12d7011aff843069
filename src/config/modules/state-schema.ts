import { z } from 'zod';
import { kvOrRedisAdapterSchema } from './adapter-schemas.js';

/** iii-state's config (iii's StateModuleConfig keys; docs/state.md). */
export const stateModuleSchema = z
  .strictObject({
    adapter: kvOrRedisAdapterSchema('Where state is kept: `kv` (default) or `redis`. iii\'s `bridge` adapter is not supported'),
    triggers_enabled: z.boolean().optional().describe('Run `state` triggers on changes (default true)'),
    max_value_bytes: z.int().min(1).optional().describe('Refuse a `state::set` whose JSON value, or a `state::update` whose resulting value, is larger than this many bytes (`VALUE_TOO_LARGE`); unset: no limit'),
    save_interval_ms: z.int().min(100).max(3_600_000).optional().describe('How often (ms) a changed `file_based` store is written; overrides the adapter\'s'),
  })
  .describe('Key-value state with change triggers: `state::set/get/delete/update/list/list_groups` and the `state` trigger type');

export type StateModuleInput = z.output<typeof stateModuleSchema>;
