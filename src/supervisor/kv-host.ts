import type { Logger } from 'pino';
import type { IpcChannel } from '../bus/ipc-channel.js';
import { KvFile } from '../modules/storage/kv-file.js';
import type { KvChange, KvUpdateOp } from '../modules/storage/kv-store.js';
import { answerIpcRequests } from '../bus/ipc-requests.js';
import type { KvChangeMessage, KvRequest } from '../modules/storage/ipc-kv-store.js';
import { KV_TAG, isKvRequest } from '../modules/storage/ipc-kv-store.js';
import { MemoryKvStore, MemoryLeaseStore } from '../modules/storage/memory-kv-store.js';
import type { KvStoreSpec } from '../modules/storage/store-specs.js';

interface Attached {
  unsubscribe: () => void;
  /** store id → namespace prefixes this child watches. */
  watching: Map<string, Set<string>>;
  /** Lease holders this child has used: released when it exits. */
  holders: Set<string>;
}

interface HostedStore {
  store: MemoryKvStore;
  file: KvFile | undefined;
}

/**
 * The primary's side of the embedded stores (docs/modules.md#where-data-lives): the one copy of every
 * `kv` store, applied one request at a time in arrival order, with every change sent to the children
 * that watch its namespace; and the cluster's leases, released the moment their child exits.
 */
export class KvHost {
  private readonly stores = new Map<string, HostedStore>();
  private readonly leases = new MemoryLeaseStore();
  private readonly channels = new Map<IpcChannel, Attached>();

  constructor(
    specs: ReadonlyMap<string, KvStoreSpec>,
    private readonly logger: Logger,
  ) {
    for (const [id, spec] of specs) {
      if (spec.kind !== 'memory') continue;
      const store = new MemoryKvStore();
      const file = spec.file === undefined ? undefined : new KvFile(store, spec.file.directory, spec.file.saveIntervalMs, logger);
      this.stores.set(id, { store, file });
      store.watch('', (change) => this.broadcast(id, change));
    }
  }

  /** Loads the `file_based` stores; throws when a file cannot be read (the engine must not start empty). */
  start(): void {
    for (const { file } of this.stores.values()) file?.start();
  }

  attach(channel: IpcChannel): void {
    const attached: Attached = { unsubscribe: () => undefined, watching: new Map(), holders: new Set() };
    attached.unsubscribe = answerIpcRequests(channel, KV_TAG, isKvRequest, (request) => this.apply(attached, request));
    this.channels.set(channel, attached);
  }

  detach(channel: IpcChannel): void {
    const attached = this.channels.get(channel);
    if (attached === undefined) return;
    attached.unsubscribe();
    this.channels.delete(channel);
    if (attached.holders.size > 0) this.leases.releaseWhere((holder) => attached.holders.has(holder));
  }

  /** Saves the `file_based` stores one last time. Idempotent. */
  close(): void {
    for (const { file } of this.stores.values()) file?.close();
  }

  private apply(attached: Attached, request: KvRequest): unknown {
    const args = request.args;
    const text = (index: number): string => {
      const value = args[index];
      if (typeof value !== 'string') throw new Error(`argument ${index} of ${request.op} must be a string`);
      return value;
    };
    if (request.op === 'acquire' || request.op === 'release') {
      const holder = text(1);
      attached.holders.add(holder);
      if (request.op === 'release') return this.leases.releaseNow(text(0), holder);
      const ttl = args[2];
      return this.leases.acquireNow(text(0), holder, typeof ttl === 'number' && ttl > 0 ? ttl : 1000);
    }
    const hosted = this.stores.get(request.store);
    if (hosted === undefined) throw new Error(`no store ${request.store} is held by the primary`);
    const store = hosted.store;
    switch (request.op) {
      case 'get':
        return store.getNow(text(0), text(1), text(2));
      case 'set':
        return store.setNow(text(0), text(1), text(2), args[3]);
      case 'delete':
        return store.deleteNow(text(0), text(1), text(2));
      case 'update':
        if (!Array.isArray(args[3])) throw new Error('update needs an array of ops');
        return store.updateNow(text(0), text(1), text(2), args[3] as KvUpdateOp[], typeof args[4] === 'number' && args[4] > 0 ? args[4] : undefined);
      case 'list':
        return store.listNow(text(0), text(1));
      case 'listGroups':
        return store.listGroupsNow(text(0));
      case 'listNamespaces':
        return store.listNamespacesNow(text(0));
      case 'notify':
        store.notifyNow(text(0), text(1), text(2), args[3]);
        return true;
      case 'watch': {
        let prefixes = attached.watching.get(request.store);
        if (prefixes === undefined) {
          prefixes = new Set();
          attached.watching.set(request.store, prefixes);
        }
        prefixes.add(text(0));
        return true;
      }
      default:
        throw new Error(`unknown kv operation ${String(request.op)}`);
    }
  }

  private broadcast(storeId: string, change: KvChange): void {
    let message: KvChangeMessage | undefined;
    for (const [channel, attached] of this.channels) {
      const prefixes = attached.watching.get(storeId);
      if (prefixes === undefined) continue;
      let wanted = false;
      for (const prefix of prefixes) {
        if (change.namespace.startsWith(prefix)) {
          wanted = true;
          break;
        }
      }
      if (!wanted) continue;
      message ??= { sy: 'kv-change', store: storeId, change };
      channel.send(message);
    }
  }
}
