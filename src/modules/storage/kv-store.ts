/**
 * The storage seam every iii module shares (state, stream; queue keeps its own store).
 *
 * A value lives at (namespace, group, key): `state` uses namespace "state", group = scope; `stream`
 * uses namespace "stream:<stream_name>", group = group_id, key = item_id. Values are JSON.
 *
 * Implementations:
 * - embedded (no Redis): one owner holds the data — the primary — reached from the children over
 *   cluster IPC; `file_based` also writes it to disk so an engine restart loses nothing;
 * - distributed: Redis (the cluster's own, or the adapter's `redis_url`).
 * Never one copy per child that can disagree.
 *
 * Writes are applied in one place per key (the primary, or one Redis command/script), so every
 * reader sees them in the order written per key. Every applied write produces one `KvChange`,
 * delivered to the `watch` listeners of every process of the cluster (that is how state triggers
 * and stream subscribers on other processes and nodes hear about it).
 */

/**
 * iii's update operations (its `UpdateOp`, tagged by `type`). A `path` names one field of the
 * top-level object (`"a.b"` is the key `a.b`, as in iii); `merge` and `append` also take an array of
 * segments, walking into nested objects. Semantics: update-ops.ts.
 */
export type KvUpdateOp =
  | { type: 'set'; path: string; value?: unknown }
  | { type: 'merge'; path?: string | string[]; value: unknown }
  | { type: 'increment'; path: string; by: number }
  | { type: 'decrement'; path: string; by: number }
  | { type: 'append'; path?: string | string[]; value: unknown }
  | { type: 'remove'; path: string };

/** An op that could not be applied; the others still are (iii's `UpdateOpError`). */
export interface KvUpdateOpError {
  op_index: number;
  code: string;
  message: string;
  doc_url?: string;
}

export interface KvSetResult {
  old_value: unknown;
  new_value: unknown;
}

export interface KvUpdateResult extends KvSetResult {
  errors?: KvUpdateOpError[];
}

export interface KvDeleteResult {
  old_value: unknown;
}

/**
 * One applied write, as every process's watchers see it. `old_value` is undefined when created.
 * Kind `message`: not a write but a `notify` (nothing stored; `new_value` is the message).
 */
export interface KvChange {
  namespace: string;
  group: string;
  key: string;
  kind: 'created' | 'updated' | 'deleted' | 'message';
  old_value: unknown;
  new_value: unknown;
}

export type KvChangeListener = (change: KvChange) => void;

export interface KvStore {
  get(namespace: string, group: string, key: string): Promise<unknown>;
  set(namespace: string, group: string, key: string, value: unknown): Promise<KvSetResult>;
  delete(namespace: string, group: string, key: string): Promise<KvDeleteResult>;
  /**
   * Applies iii's ops to the stored value. With `maxValueBytes`, a result whose JSON is larger is not
   * written: the call rejects with a ValueTooLargeError (update-ops.ts), so repeated updates cannot
   * grow a value past the module's limit. Checked where the write is applied (the primary, or
   * between Redis's read and its compare-and-set), on the value actually written.
   */
  update(namespace: string, group: string, key: string, ops: readonly KvUpdateOp[], maxValueBytes?: number): Promise<KvUpdateResult>;
  /** Every value of one group. */
  list(namespace: string, group: string): Promise<unknown[]>;
  /** The groups of one namespace that hold at least one key. */
  listGroups(namespace: string): Promise<string[]>;
  /** Namespaces starting with `prefix` that hold at least one key (stream::list_all). */
  listNamespaces(prefix: string): Promise<string[]>;
  /** Listens to every applied write in the cluster whose namespace starts with `prefix`; returns the unsubscribe. */
  watch(prefix: string, listener: KvChangeListener): () => void;
  /**
   * Delivers `message` to the watchers of `namespace` on every process, as a change of kind
   * `message`, storing nothing: the way a module sends what no write carries (stream::send), on the
   * same path as the changes.
   */
  notify(namespace: string, group: string, key: string, message: unknown): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
}

/**
 * Named leases with a time to live, held by one holder at a time cluster-wide (cron's "who fires").
 * Embedded: held by the primary, released the moment the holding child exits; Redis: a key with a TTL.
 */
export interface LeaseStore {
  /** Takes the lease, or extends it when `holder` has it already; false when another holder has it. */
  acquire(name: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up if `holder` has it. */
  release(name: string, holder: string): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
}
