import { Redis } from 'ioredis';
import type { RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import type { KvChange, KvChangeListener, KvDeleteResult, KvSetResult, KvStore, KvUpdateOp, KvUpdateResult, LeaseStore } from './kv-store.js';
import { applyUpdateOps, checkValueSize } from './update-ops.js';

/**
 * The Redis store (docs/modules.md): a hash per (namespace, group) holding JSON text, a set of the
 * groups of each namespace and a set of namespaces, all under `<cluster>:kv:`. `set` and `delete`
 * are one script each (read the old value, write, publish the change), so a key's writes apply and
 * are announced in one order; `update` reads, applies iii's ops here, and writes with a
 * compare-and-set script, retrying when another write came first. Changes go to one pub/sub channel
 * that every process of every node subscribes to when something watches.
 */

// Each change is published as the JSON array [namespace, group, key, kind, old, new]; the script
// appends kind, old and new to a header the caller encoded.
const WRITE = `
local old = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[7] == 'cas' then
  if ARGV[8] == '1' then
    if old ~= ARGV[9] then return {0} end
  elseif old then return {0} end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
redis.call('SADD', KEYS[3], ARGV[4])
if old then
  redis.call('PUBLISH', ARGV[5], ARGV[6] .. '"updated",' .. old .. ',' .. ARGV[2] .. ']')
  return {1, old}
end
redis.call('PUBLISH', ARGV[5], ARGV[6] .. '"created",null,' .. ARGV[2] .. ']')
return {1}
`;

const DELETE = `
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old then return false end
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HLEN', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[2], ARGV[2])
  if redis.call('SCARD', KEYS[2]) == 0 then redis.call('SREM', KEYS[3], ARGV[3]) end
end
redis.call('PUBLISH', ARGV[4], ARGV[5] .. '"deleted",' .. old .. ',null]')
return old
`;

const ACQUIRE = `
local holder = redis.call('GET', KEYS[1])
if (not holder) or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
`;

const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
`;

interface Scripts {
  kvWrite(...args: string[]): Promise<[number, string?]>;
  kvDelete(...args: string[]): Promise<string | null>;
  leaseAcquire(key: string, holder: string, ttlMs: string): Promise<number>;
  leaseRelease(key: string, holder: string): Promise<number>;
}

/** How many times `update` retries its compare-and-set before failing (only under heavy contention on one key). */
const MAX_UPDATE_ATTEMPTS = 64;

export interface RedisKvStoreOptions {
  url: string;
  /** Keys and the channel go under `<keyPrefix>kv:`. */
  keyPrefix: string;
  logger: Logger;
  tlsCa?: string;
}

function connectionOptions(name: string, url: string, tlsCa: string | undefined): RedisOptions {
  const options: RedisOptions = {
    lazyConnect: true,
    // Commands wait for a reconnect (bounded by commandTimeout), rather than failing at the first blip.
    maxRetriesPerRequest: 1,
    commandTimeout: 5_000,
    connectTimeout: 5_000,
    retryStrategy: (attempt: number) => Math.min(25 * 2 ** Math.min(attempt, 10), 2_000),
    connectionName: `switchyard:${name}`,
  };
  if (url.startsWith('rediss://')) options.tls = tlsCa === undefined ? {} : { ca: tlsCa };
  return options;
}

export class RedisKvStore implements KvStore, LeaseStore {
  private readonly client: Redis;
  private subscriber: Redis | undefined;
  private readonly prefix: string;
  private readonly channel: string;
  private readonly watchers = new Set<{ prefix: string; listener: KvChangeListener }>();
  private closing: Promise<void> | undefined;

  constructor(private readonly options: RedisKvStoreOptions) {
    this.prefix = `${options.keyPrefix}kv:`;
    this.channel = `${this.prefix}changes`;
    this.client = new Redis(options.url, connectionOptions('kv', options.url, options.tlsCa));
    this.client.on('error', (err: Error) => options.logger.warn({ err }, 'kv store Redis connection error'));
    this.client.defineCommand('kvWrite', { numberOfKeys: 3, lua: WRITE });
    this.client.defineCommand('kvDelete', { numberOfKeys: 3, lua: DELETE });
    this.client.defineCommand('leaseAcquire', { numberOfKeys: 1, lua: ACQUIRE });
    this.client.defineCommand('leaseRelease', { numberOfKeys: 1, lua: RELEASE });
  }

  private get scripts(): Scripts {
    return this.client as unknown as Scripts;
  }

  async start(): Promise<void> {
    await this.client.connect();
  }

  private hashKey(namespace: string, group: string): string {
    return `${this.prefix}h:${JSON.stringify([namespace, group])}`;
  }

  private groupsKey(namespace: string): string {
    return `${this.prefix}g:${JSON.stringify(namespace)}`;
  }

  private get namespacesKey(): string {
    return `${this.prefix}ns`;
  }

  /** The start of a change message: `[namespace, group, key,` (the script appends the rest). */
  private header(namespace: string, group: string, key: string): string {
    return `${JSON.stringify([namespace, group, key]).slice(0, -1)},`;
  }

  async get(namespace: string, group: string, key: string): Promise<unknown> {
    const text = await this.client.hget(this.hashKey(namespace, group), key);
    return text === null ? undefined : (JSON.parse(text) as unknown);
  }

  async set(namespace: string, group: string, key: string, value: unknown): Promise<KvSetResult> {
    const text = JSON.stringify(value ?? null);
    const [, old] = await this.write(namespace, group, key, text, undefined);
    return { old_value: old === undefined ? undefined : (JSON.parse(old) as unknown), new_value: value };
  }

  /** One write script; with `expected` a compare-and-set (`null`: the key must be absent). */
  private write(namespace: string, group: string, key: string, text: string, expected: string | null | undefined): Promise<[number, string?]> {
    return this.scripts.kvWrite(
      this.hashKey(namespace, group),
      this.groupsKey(namespace),
      this.namespacesKey,
      key,
      text,
      group,
      namespace,
      this.channel,
      this.header(namespace, group, key),
      expected === undefined ? 'set' : 'cas',
      expected === null || expected === undefined ? '0' : '1',
      expected ?? '',
    );
  }

  async delete(namespace: string, group: string, key: string): Promise<KvDeleteResult> {
    const old = await this.scripts.kvDelete(
      this.hashKey(namespace, group),
      this.groupsKey(namespace),
      this.namespacesKey,
      key,
      group,
      namespace,
      this.channel,
      this.header(namespace, group, key),
    );
    return { old_value: old === null ? undefined : (JSON.parse(old) as unknown) };
  }

  async update(namespace: string, group: string, key: string, ops: readonly KvUpdateOp[], maxValueBytes?: number): Promise<KvUpdateResult> {
    const hash = this.hashKey(namespace, group);
    for (let attempt = 0; attempt < MAX_UPDATE_ATTEMPTS; attempt++) {
      const oldText = await this.client.hget(hash, key);
      const old = oldText === null ? undefined : (JSON.parse(oldText) as unknown);
      const { value, errors } = applyUpdateOps(old, ops);
      const text = JSON.stringify(value ?? null);
      // On the value this attempt would write: another writer's change may have grown it meanwhile.
      checkValueSize(text, maxValueBytes);
      const [applied] = await this.write(namespace, group, key, text, oldText);
      if (applied === 1) return { old_value: old, new_value: value, ...(errors.length === 0 ? {} : { errors }) };
    }
    throw new Error(`update of ${key} lost ${MAX_UPDATE_ATTEMPTS} races in a row to concurrent writes`);
  }

  async list(namespace: string, group: string): Promise<unknown[]> {
    const texts = await this.client.hvals(this.hashKey(namespace, group));
    return texts.map((text) => JSON.parse(text) as unknown);
  }

  listGroups(namespace: string): Promise<string[]> {
    return this.client.smembers(this.groupsKey(namespace));
  }

  async listNamespaces(prefix: string): Promise<string[]> {
    const all = await this.client.smembers(this.namespacesKey);
    return all.filter((namespace) => namespace.startsWith(prefix));
  }

  watch(prefix: string, listener: KvChangeListener): () => void {
    const entry = { prefix, listener };
    this.watchers.add(entry);
    this.subscribe();
    return () => this.watchers.delete(entry);
  }

  /** On the changes' channel, so a process hears a key's messages and writes in the order published. */
  async notify(namespace: string, group: string, key: string, message: unknown): Promise<void> {
    await this.client.publish(this.channel, JSON.stringify([namespace, group, key, 'message', null, message ?? null]));
  }

  /** One subscriber connection per store, opened at the first watch; ioredis resubscribes after a reconnect. */
  private subscribe(): void {
    if (this.subscriber !== undefined || this.closing !== undefined) return;
    const subscriber = new Redis(this.options.url, { ...connectionOptions('kv-watch', this.options.url, this.options.tlsCa), autoResubscribe: true });
    this.subscriber = subscriber;
    subscriber.on('error', (err: Error) => this.options.logger.warn({ err }, 'kv watch Redis connection error'));
    subscriber.on('message', (_channel: string, message: string) => this.deliver(message));
    subscriber.subscribe(this.channel).catch((err: unknown) => this.options.logger.error({ err }, 'kv watch could not subscribe'));
  }

  private deliver(message: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(message);
    } catch {
      return;
    }
    if (!Array.isArray(parsed) || parsed.length !== 6) return;
    const [namespace, group, key, kind, oldValue, newValue] = parsed as [unknown, unknown, unknown, unknown, unknown, unknown];
    if (typeof namespace !== 'string' || typeof group !== 'string' || typeof key !== 'string') return;
    if (kind !== 'created' && kind !== 'updated' && kind !== 'deleted' && kind !== 'message') return;
    const change: KvChange = {
      namespace,
      group,
      key,
      kind,
      old_value: kind === 'created' || kind === 'message' ? undefined : oldValue,
      new_value: kind === 'deleted' ? undefined : newValue,
    };
    for (const watcher of this.watchers) {
      if (!namespace.startsWith(watcher.prefix)) continue;
      try {
        watcher.listener(change);
      } catch (err) {
        this.options.logger.error({ err }, 'kv watcher failed');
      }
    }
  }

  async acquire(name: string, holder: string, ttlMs: number): Promise<boolean> {
    return (await this.scripts.leaseAcquire(`${this.prefix}lease:${name}`, holder, String(Math.max(1, Math.round(ttlMs))))) === 1;
  }

  async release(name: string, holder: string): Promise<void> {
    await this.scripts.leaseRelease(`${this.prefix}lease:${name}`, holder);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.watchers.clear();
      for (const connection of [this.client, this.subscriber]) {
        if (connection === undefined) continue;
        try {
          if (connection.status === 'ready') await connection.quit();
        } catch {
          // closing anyway
        }
        connection.disconnect();
      }
    })();
    return this.closing;
  }
}
