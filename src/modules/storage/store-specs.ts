import { resolve } from 'node:path';
import { isPlainObject } from '../../values.js';

/**
 * Which store a module's `adapter` config names (docs/modules.md#where-data-lives). Pure, and the same
 * on the primary and on every child, so both agree on which store a child's request means.
 */
export type KvStoreSpec =
  | { kind: 'memory'; file?: { directory: string; saveIntervalMs: number } }
  | { kind: 'redis'; url: string };

/** iii's defaults: `kv` adapter, `in_memory`, directory `kv_store_data.db`, saved every 5 s. */
export const DEFAULT_KV_DIRECTORY = 'kv_store_data.db';
export const DEFAULT_SAVE_INTERVAL_MS = 5000;
/** iii's default for the `redis` adapter's `redis_url`. */
export const DEFAULT_REDIS_URL = 'redis://localhost:6379';

export interface StoreContext {
  /** switchyard-cluster `redis_url`: set, the cluster is distributed and `kv` data lives in it. */
  clusterRedisUrl?: string;
}

/**
 * A module's store from its config (`adapter: {name, config}`, plus iii-state's top-level
 * `save_interval_ms`). `kv` in a distributed cluster is the cluster's Redis: a store per node
 * would give each node its own copy.
 */
export function storeSpecOf(moduleConfig: Readonly<Record<string, unknown>> | undefined, context: StoreContext): KvStoreSpec {
  const adapter = isPlainObject(moduleConfig?.adapter) ? moduleConfig.adapter : {};
  const config = isPlainObject(adapter.config) ? adapter.config : {};
  if (adapter.name === 'redis') {
    const url = typeof config.redis_url === 'string' ? config.redis_url : (context.clusterRedisUrl ?? DEFAULT_REDIS_URL);
    return { kind: 'redis', url };
  }
  if (context.clusterRedisUrl !== undefined) return { kind: 'redis', url: context.clusterRedisUrl };
  if (config.store_method !== 'file_based') return { kind: 'memory' };
  const interval = moduleConfig?.save_interval_ms ?? config.save_interval_ms;
  return {
    kind: 'memory',
    file: {
      // Relative to the working directory, which the primary and its children share.
      directory: resolve(typeof config.file_path === 'string' ? config.file_path : DEFAULT_KV_DIRECTORY),
      saveIntervalMs: typeof interval === 'number' ? interval : DEFAULT_SAVE_INTERVAL_MS,
    },
  };
}

/** One name per distinct store: modules naming the same store share it (and its data). */
export function storeIdOf(spec: KvStoreSpec): string {
  if (spec.kind === 'redis') return `redis:${spec.url}`;
  return spec.file === undefined ? 'memory' : `file:${spec.file.directory}`;
}
