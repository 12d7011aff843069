import type { Logger } from 'pino';
import type { KvChangeListener, KvDeleteResult, KvSetResult, KvStore, KvUpdateOp, KvUpdateResult, LeaseStore } from './kv-store.js';
import type { RedisKvStore } from './redis-kv-store.js';

/**
 * The Redis store, loaded at its first use: an embedded engine that names no Redis never loads
 * ioredis (about 9 MB of RSS per child, docs/performance.md).
 */
export class LazyRedisStore implements KvStore, LeaseStore {
  private loading: Promise<RedisKvStore> | undefined;
  private closed = false;

  constructor(
    private readonly url: string,
    private readonly keyPrefix: string,
    private readonly logger: Logger,
  ) {}

  private store(): Promise<RedisKvStore> {
    if (this.closed) return Promise.reject(new Error('the kv store is closed'));
    this.loading ??= import('./redis-kv-store.js').then(({ RedisKvStore: Store }) => new Store({ url: this.url, keyPrefix: this.keyPrefix, logger: this.logger }));
    return this.loading;
  }

  async get(namespace: string, group: string, key: string): Promise<unknown> {
    return (await this.store()).get(namespace, group, key);
  }

  async set(namespace: string, group: string, key: string, value: unknown): Promise<KvSetResult> {
    return (await this.store()).set(namespace, group, key, value);
  }

  async delete(namespace: string, group: string, key: string): Promise<KvDeleteResult> {
    return (await this.store()).delete(namespace, group, key);
  }

  async update(namespace: string, group: string, key: string, ops: readonly KvUpdateOp[], maxValueBytes?: number): Promise<KvUpdateResult> {
    return (await this.store()).update(namespace, group, key, ops, maxValueBytes);
  }

  async list(namespace: string, group: string): Promise<unknown[]> {
    return (await this.store()).list(namespace, group);
  }

  async listGroups(namespace: string): Promise<string[]> {
    return (await this.store()).listGroups(namespace);
  }

  async listNamespaces(prefix: string): Promise<string[]> {
    return (await this.store()).listNamespaces(prefix);
  }

  watch(prefix: string, listener: KvChangeListener): () => void {
    let unwatch: (() => void) | undefined;
    let cancelled = false;
    this.store()
      .then((store) => {
        if (!cancelled) unwatch = store.watch(prefix, listener);
      })
      .catch((err: unknown) => this.logger.error({ err }, 'kv watch could not start'));
    return () => {
      cancelled = true;
      unwatch?.();
    };
  }

  async notify(namespace: string, group: string, key: string, message: unknown): Promise<void> {
    return (await this.store()).notify(namespace, group, key, message);
  }

  async acquire(name: string, holder: string, ttlMs: number): Promise<boolean> {
    return (await this.store()).acquire(name, holder, ttlMs);
  }

  async release(name: string, holder: string): Promise<void> {
    return (await this.store()).release(name, holder);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const loading = this.loading;
    if (loading !== undefined) await (await loading).close();
  }
}
