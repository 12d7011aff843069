import type { IpcChannel } from '../../bus/ipc-channel.js';
import { IpcRequester } from '../../bus/ipc-requests.js';
import type { KvChange, KvChangeListener, KvDeleteResult, KvSetResult, KvStore, KvUpdateOp, KvUpdateResult, LeaseStore } from './kv-store.js';
import { isPlainObject } from '../../values.js';

/**
 * The child's end of the primary-held store (embedded mode, docs/modules.md): every call is one IPC
 * request answered by the primary (src/supervisor/kv-host.ts), which applies writes one at a time and
 * sends every change to the children watching its namespace. Tagged `sy: "kv"` on the channel the
 * bus and status messages share (request and answer: src/bus/ipc-requests.ts).
 */

export const KV_TAG = 'kv';

export type KvOp = 'get' | 'set' | 'delete' | 'update' | 'list' | 'listGroups' | 'listNamespaces' | 'watch' | 'notify' | 'acquire' | 'release';

/** A request's body (the helper adds `sy` and `id`). */
export interface KvRequest extends Record<string, unknown> {
  /** store-specs.ts storeIdOf; empty for lease operations. */
  store: string;
  op: KvOp;
  args: unknown[];
}

export interface KvChangeMessage {
  sy: 'kv-change';
  store: string;
  change: KvChange;
}

export function isKvRequest(message: Record<string, unknown>): message is Record<string, unknown> & KvRequest {
  return typeof message.store === 'string' && typeof message.op === 'string' && Array.isArray(message.args);
}

function isKvChange(message: unknown): message is KvChangeMessage {
  return isPlainObject(message) && message.sy === 'kv-change' && typeof message.store === 'string' && isPlainObject(message.change);
}

/** A request the primary has not answered within this is failed (it is busy or gone). */
const REQUEST_TIMEOUT_MS = 5_000;

/** One child's link to the primary's stores: the requests in flight and the change listeners. */
export class IpcKvLink {
  private readonly requests: IpcRequester<KvRequest>;
  private readonly watchers = new Map<string, Set<{ prefix: string; listener: KvChangeListener }>>();
  private readonly unsubscribe: () => void;
  private closed = false;

  constructor(channel: IpcChannel) {
    this.requests = new IpcRequester<KvRequest>(channel, KV_TAG, REQUEST_TIMEOUT_MS, (body) => body.op);
    this.unsubscribe = channel.onMessage((message) => {
      if (isKvChange(message)) this.deliver(message);
    });
  }

  request(store: string, op: KvOp, args: unknown[]): Promise<unknown> {
    return this.requests.request({ store, op, args });
  }

  store(storeId: string): KvStore {
    return new IpcKvStore(this, storeId);
  }

  leases(): LeaseStore {
    return {
      acquire: async (name, holder, ttlMs) => (await this.request('', 'acquire', [name, holder, ttlMs])) === true,
      release: async (name, holder) => {
        await this.request('', 'release', [name, holder]);
      },
      close: () => Promise.resolve(),
    };
  }

  watch(store: string, prefix: string, listener: KvChangeListener): () => void {
    let set = this.watchers.get(store);
    if (set === undefined) {
      set = new Set();
      this.watchers.set(store, set);
    }
    const entry = { prefix, listener };
    set.add(entry);
    // The primary sends this child the changes under `prefix` from now on (it keeps the prefix).
    this.request(store, 'watch', [prefix]).catch(() => undefined);
    return () => set.delete(entry);
  }

  /** Fails what is in flight and stops listening. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe();
    this.requests.close();
    this.watchers.clear();
  }

  private deliver(message: KvChangeMessage): void {
    const { change } = message;
    for (const watcher of this.watchers.get(message.store) ?? []) {
      if (change.namespace.startsWith(watcher.prefix)) watcher.listener(change);
    }
  }
}

class IpcKvStore implements KvStore {
  constructor(
    private readonly link: IpcKvLink,
    private readonly storeId: string,
  ) {}

  get(namespace: string, group: string, key: string): Promise<unknown> {
    return this.link.request(this.storeId, 'get', [namespace, group, key]);
  }

  async set(namespace: string, group: string, key: string, value: unknown): Promise<KvSetResult> {
    return (await this.link.request(this.storeId, 'set', [namespace, group, key, value])) as KvSetResult;
  }

  async delete(namespace: string, group: string, key: string): Promise<KvDeleteResult> {
    return (await this.link.request(this.storeId, 'delete', [namespace, group, key])) as KvDeleteResult;
  }

  /** The primary checks the limit; its ValueTooLargeError comes back as an error with code VALUE_TOO_LARGE. */
  async update(namespace: string, group: string, key: string, ops: readonly KvUpdateOp[], maxValueBytes?: number): Promise<KvUpdateResult> {
    return (await this.link.request(this.storeId, 'update', [namespace, group, key, ops, maxValueBytes ?? null])) as KvUpdateResult;
  }

  async list(namespace: string, group: string): Promise<unknown[]> {
    return (await this.link.request(this.storeId, 'list', [namespace, group])) as unknown[];
  }

  async listGroups(namespace: string): Promise<string[]> {
    return (await this.link.request(this.storeId, 'listGroups', [namespace])) as string[];
  }

  async listNamespaces(prefix: string): Promise<string[]> {
    return (await this.link.request(this.storeId, 'listNamespaces', [prefix])) as string[];
  }

  watch(prefix: string, listener: KvChangeListener): () => void {
    return this.link.watch(this.storeId, prefix, listener);
  }

  async notify(namespace: string, group: string, key: string, message: unknown): Promise<void> {
    await this.link.request(this.storeId, 'notify', [namespace, group, key, message]);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
