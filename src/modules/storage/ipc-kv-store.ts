import type { IpcChannel } from '../../bus/ipc-channel.js';
import type { KvChange, KvChangeListener, KvDeleteResult, KvSetResult, KvStore, KvUpdateOp, KvUpdateResult, LeaseStore } from './kv-store.js';
import { isPlainObject } from '../../values.js';

/**
 * The child's end of the primary-held store (embedded mode, docs/modules.md): every call is one IPC
 * request answered by the primary (src/supervisor/kv-host.ts), which applies writes one at a time and
 * sends every change to the children watching its namespace. Tagged `sy: "kv"` on the channel the
 * bus and status messages share.
 */

export type KvOp = 'get' | 'set' | 'delete' | 'update' | 'list' | 'listGroups' | 'listNamespaces' | 'watch' | 'notify' | 'acquire' | 'release';

export interface KvRequestMessage {
  sy: 'kv';
  id: number;
  /** store-specs.ts storeIdOf; empty for lease operations. */
  store: string;
  op: KvOp;
  args: unknown[];
}

export interface KvReplyMessage {
  sy: 'kv-reply';
  id: number;
  ok: boolean;
  value?: unknown;
  message?: string;
}

export interface KvChangeMessage {
  sy: 'kv-change';
  store: string;
  change: KvChange;
}

export function isKvRequest(message: unknown): message is KvRequestMessage {
  return isPlainObject(message) && message.sy === 'kv' && typeof message.id === 'number' && typeof message.store === 'string' && typeof message.op === 'string' && Array.isArray(message.args);
}

function isKvReply(message: unknown): message is KvReplyMessage {
  return isPlainObject(message) && message.sy === 'kv-reply' && typeof message.id === 'number';
}

function isKvChange(message: unknown): message is KvChangeMessage {
  return isPlainObject(message) && message.sy === 'kv-change' && typeof message.store === 'string' && isPlainObject(message.change);
}

/** A request the primary has not answered within this is failed (it is busy or gone). */
const REQUEST_TIMEOUT_MS = 5_000;

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/** One child's link to the primary's stores: the requests in flight and the change listeners. */
export class IpcKvLink {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly watchers = new Map<string, Set<{ prefix: string; listener: KvChangeListener }>>();
  private readonly unsubscribe: () => void;
  private closed = false;

  constructor(private readonly channel: IpcChannel) {
    this.unsubscribe = channel.onMessage((message) => {
      if (isKvReply(message)) this.settle(message);
      else if (isKvChange(message)) this.deliver(message);
    });
  }

  request(store: string, op: KvOp, args: unknown[]): Promise<unknown> {
    if (this.closed) return Promise.reject(new Error('the kv store is closed'));
    const id = this.nextId++;
    return new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`the primary did not answer ${op} within ${REQUEST_TIMEOUT_MS} ms`));
      }, REQUEST_TIMEOUT_MS);
      this.pending.set(id, { resolve, reject, timer });
      const message: KvRequestMessage = { sy: 'kv', id, store, op, args };
      this.channel.send(message);
    });
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
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(new Error('the kv store closed'));
      this.pending.delete(id);
    }
    this.watchers.clear();
  }

  private settle(reply: KvReplyMessage): void {
    const pending = this.pending.get(reply.id);
    if (pending === undefined) return;
    this.pending.delete(reply.id);
    clearTimeout(pending.timer);
    if (reply.ok) pending.resolve(reply.value);
    else pending.reject(new Error(reply.message ?? 'kv request failed'));
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

  async update(namespace: string, group: string, key: string, ops: readonly KvUpdateOp[]): Promise<KvUpdateResult> {
    return (await this.link.request(this.storeId, 'update', [namespace, group, key, ops])) as KvUpdateResult;
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
