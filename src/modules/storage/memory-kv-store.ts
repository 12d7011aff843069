import type { KvChange, KvChangeListener, KvDeleteResult, KvSetResult, KvStore, KvUpdateOp, KvUpdateResult, LeaseStore } from './kv-store.js';
import { applyUpdateOps, checkValueSize } from './update-ops.js';

/** namespace → group → key → value; Maps keep insertion order (iii's store lists in insertion order). */
export type KvData = Map<string, Map<string, Map<string, unknown>>>;

/** The data as plain JSON (the file format): `{ namespace: { group: { key: value } } }`. */
export type KvDump = Record<string, Record<string, Record<string, unknown>>>;

/**
 * The in-memory store: the whole store in one process. Used directly by a single-process engine, and
 * by the primary as the one owner of an embedded cluster's data (kv-host.ts serves it to the
 * children). Every method applies synchronously, so writes to a key are applied in call order.
 */
export class MemoryKvStore implements KvStore {
  private readonly data: KvData = new Map();
  private readonly watchers = new Set<{ prefix: string; listener: KvChangeListener }>();
  /** Called after every applied write (file persistence marks the store dirty). */
  onWrite: (() => void) | undefined;

  get(namespace: string, group: string, key: string): Promise<unknown> {
    return Promise.resolve(this.getNow(namespace, group, key));
  }

  getNow(namespace: string, group: string, key: string): unknown {
    return this.data.get(namespace)?.get(group)?.get(key);
  }

  set(namespace: string, group: string, key: string, value: unknown): Promise<KvSetResult> {
    return Promise.resolve(this.setNow(namespace, group, key, value));
  }

  setNow(namespace: string, group: string, key: string, value: unknown): KvSetResult {
    const keys = this.groupFor(namespace, group);
    const old = keys.get(key);
    keys.set(key, value);
    this.changed({ namespace, group, key, kind: old === undefined ? 'created' : 'updated', old_value: old, new_value: value });
    return { old_value: old, new_value: value };
  }

  delete(namespace: string, group: string, key: string): Promise<KvDeleteResult> {
    return Promise.resolve(this.deleteNow(namespace, group, key));
  }

  deleteNow(namespace: string, group: string, key: string): KvDeleteResult {
    const groups = this.data.get(namespace);
    const keys = groups?.get(group);
    const old = keys?.get(key);
    if (groups === undefined || keys === undefined || old === undefined) return { old_value: undefined };
    keys.delete(key);
    if (keys.size === 0) groups.delete(group);
    if (groups.size === 0) this.data.delete(namespace);
    this.changed({ namespace, group, key, kind: 'deleted', old_value: old, new_value: undefined });
    return { old_value: old };
  }

  update(namespace: string, group: string, key: string, ops: readonly KvUpdateOp[], maxValueBytes?: number): Promise<KvUpdateResult> {
    // A throw in the executor (ValueTooLargeError) rejects the promise.
    return new Promise((resolve) => resolve(this.updateNow(namespace, group, key, ops, maxValueBytes)));
  }

  /** Throws a ValueTooLargeError, writing nothing, when the result passes `maxValueBytes`. */
  updateNow(namespace: string, group: string, key: string, ops: readonly KvUpdateOp[], maxValueBytes?: number): KvUpdateResult {
    const old = this.getNow(namespace, group, key);
    const { value, errors } = applyUpdateOps(old, ops);
    if (maxValueBytes !== undefined) checkValueSize(JSON.stringify(value ?? null), maxValueBytes);
    this.groupFor(namespace, group).set(key, value);
    this.changed({ namespace, group, key, kind: old === undefined ? 'created' : 'updated', old_value: old, new_value: value });
    return { old_value: old, new_value: value, ...(errors.length === 0 ? {} : { errors }) };
  }

  list(namespace: string, group: string): Promise<unknown[]> {
    return Promise.resolve(this.listNow(namespace, group));
  }

  listNow(namespace: string, group: string): unknown[] {
    return [...(this.data.get(namespace)?.get(group)?.values() ?? [])];
  }

  listGroups(namespace: string): Promise<string[]> {
    return Promise.resolve(this.listGroupsNow(namespace));
  }

  listGroupsNow(namespace: string): string[] {
    return [...(this.data.get(namespace)?.keys() ?? [])];
  }

  listNamespaces(prefix: string): Promise<string[]> {
    return Promise.resolve(this.listNamespacesNow(prefix));
  }

  listNamespacesNow(prefix: string): string[] {
    return [...this.data.keys()].filter((namespace) => namespace.startsWith(prefix));
  }

  watch(prefix: string, listener: KvChangeListener): () => void {
    const entry = { prefix, listener };
    this.watchers.add(entry);
    return () => this.watchers.delete(entry);
  }

  notify(namespace: string, group: string, key: string, message: unknown): Promise<void> {
    this.notifyNow(namespace, group, key, message);
    return Promise.resolve();
  }

  /** A message to the watchers; not a write (the file is not marked changed). */
  notifyNow(namespace: string, group: string, key: string, message: unknown): void {
    const change: KvChange = { namespace, group, key, kind: 'message', old_value: undefined, new_value: message };
    for (const { prefix, listener } of this.watchers) if (namespace.startsWith(prefix)) listener(change);
  }

  close(): Promise<void> {
    this.watchers.clear();
    return Promise.resolve();
  }

  /** The whole store as plain JSON (file persistence). */
  dump(): KvDump {
    const out: KvDump = {};
    for (const [namespace, groups] of this.data) {
      const groupsOut: Record<string, Record<string, unknown>> = {};
      for (const [group, keys] of groups) groupsOut[group] = Object.fromEntries(keys);
      out[namespace] = groupsOut;
    }
    return out;
  }

  /** Replaces the data with a dump (at start, from the file); no change events. */
  restore(dump: KvDump): void {
    this.data.clear();
    for (const [namespace, groups] of Object.entries(dump)) {
      const groupsIn = new Map<string, Map<string, unknown>>();
      for (const [group, keys] of Object.entries(groups)) {
        const entries = Object.entries(keys).filter(([, value]) => value !== undefined);
        if (entries.length > 0) groupsIn.set(group, new Map(entries));
      }
      if (groupsIn.size > 0) this.data.set(namespace, groupsIn);
    }
  }

  private groupFor(namespace: string, group: string): Map<string, unknown> {
    let groups = this.data.get(namespace);
    if (groups === undefined) {
      groups = new Map();
      this.data.set(namespace, groups);
    }
    let keys = groups.get(group);
    if (keys === undefined) {
      keys = new Map();
      groups.set(group, keys);
    }
    return keys;
  }

  private changed(change: KvChange): void {
    this.onWrite?.();
    for (const { prefix, listener } of this.watchers) if (change.namespace.startsWith(prefix)) listener(change);
  }
}

/** Leases in one process's memory: the single-process engine's, and the primary's for its children. */
export class MemoryLeaseStore implements LeaseStore {
  private readonly leases = new Map<string, { holder: string; expiresAt: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  acquire(name: string, holder: string, ttlMs: number): Promise<boolean> {
    return Promise.resolve(this.acquireNow(name, holder, ttlMs));
  }

  acquireNow(name: string, holder: string, ttlMs: number): boolean {
    const now = this.now();
    const held = this.leases.get(name);
    if (held !== undefined && held.holder !== holder && held.expiresAt > now) return false;
    this.leases.set(name, { holder, expiresAt: now + ttlMs });
    this.sweep(now);
    return true;
  }

  release(name: string, holder: string): Promise<void> {
    this.releaseNow(name, holder);
    return Promise.resolve();
  }

  releaseNow(name: string, holder: string): void {
    if (this.leases.get(name)?.holder === holder) this.leases.delete(name);
  }

  /** Releases every lease whose holder matches (the primary, when a child exits). */
  releaseWhere(match: (holder: string) => boolean): void {
    for (const [name, lease] of this.leases) if (match(lease.holder)) this.leases.delete(name);
  }

  close(): Promise<void> {
    this.leases.clear();
    return Promise.resolve();
  }

  /** Expired leases are dropped as new ones come, so per-tick claims cannot grow the map. */
  private sweep(now: number): void {
    if (this.leases.size < 256) return;
    for (const [name, lease] of this.leases) if (lease.expiresAt <= now) this.leases.delete(name);
  }
}
