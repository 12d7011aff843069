/* eslint-disable @typescript-eslint/require-await -- a stub store answers at once, with the interface's promises */
import type { KvChange, KvChangeListener, KvStore, KvUpdateOp, KvUpdateResult } from '../../src/modules/storage/kv-store.js';
import type { StreamBroadcast } from '../../src/modules/stream/stream-fanout.js';
import type { StreamMessage } from '../../src/modules/stream/stream-wire.js';
import { checkValueSize } from '../../src/modules/storage/update-ops.js';

/**
 * A tiny in-memory KvStore for the stream module's unit tests (the real stores have their own
 * conformance suite). `update` supports `set` and `increment` on a top-level field only.
 */
export class StubKvStore implements KvStore {
  readonly data = new Map<string, Map<string, Map<string, unknown>>>();
  private readonly watchers = new Set<{ prefix: string; listener: KvChangeListener }>();
  failNext: Error | undefined;

  private fail(): void {
    const err = this.failNext;
    this.failNext = undefined;
    if (err !== undefined) throw err;
  }

  private group(namespace: string, group: string): Map<string, unknown> {
    let groups = this.data.get(namespace);
    if (groups === undefined) this.data.set(namespace, (groups = new Map()));
    let keys = groups.get(group);
    if (keys === undefined) groups.set(group, (keys = new Map()));
    return keys;
  }

  private emit(change: KvChange): void {
    for (const w of this.watchers) if (change.namespace.startsWith(w.prefix)) w.listener(change);
  }

  async get(namespace: string, group: string, key: string): Promise<unknown> {
    this.fail();
    return this.data.get(namespace)?.get(group)?.get(key);
  }

  async set(namespace: string, group: string, key: string, value: unknown) {
    this.fail();
    const keys = this.group(namespace, group);
    const old = keys.get(key);
    keys.set(key, value);
    this.emit({ namespace, group, key, kind: old === undefined ? 'created' : 'updated', old_value: old, new_value: value });
    return { old_value: old, new_value: value };
  }

  async delete(namespace: string, group: string, key: string) {
    this.fail();
    const keys = this.data.get(namespace)?.get(group);
    const old = keys?.get(key);
    if (keys === undefined || old === undefined) return { old_value: undefined };
    keys.delete(key);
    if (keys.size === 0) this.data.get(namespace)?.delete(group);
    this.emit({ namespace, group, key, kind: 'deleted', old_value: old, new_value: undefined });
    return { old_value: old };
  }

  async update(namespace: string, group: string, key: string, ops: readonly KvUpdateOp[], maxValueBytes?: number): Promise<KvUpdateResult> {
    this.fail();
    const keys = this.group(namespace, group);
    const old = keys.get(key);
    const next: Record<string, unknown> = { ...(old as Record<string, unknown> | undefined) };
    for (const op of ops) {
      if (op.type === 'set') next[op.path] = op.value;
      if (op.type === 'increment') next[op.path] = ((next[op.path] as number | undefined) ?? 0) + op.by;
    }
    checkValueSize(JSON.stringify(next), maxValueBytes);
    keys.set(key, next);
    this.emit({ namespace, group, key, kind: old === undefined ? 'created' : 'updated', old_value: old, new_value: next });
    return { old_value: old, new_value: next };
  }

  async list(namespace: string, group: string): Promise<unknown[]> {
    this.fail();
    return [...(this.data.get(namespace)?.get(group)?.values() ?? [])];
  }

  async listGroups(namespace: string): Promise<string[]> {
    this.fail();
    return [...(this.data.get(namespace)?.entries() ?? [])].filter(([, keys]) => keys.size > 0).map(([g]) => g);
  }

  async listNamespaces(prefix: string): Promise<string[]> {
    this.fail();
    return [...this.data.keys()].filter((n) => n.startsWith(prefix));
  }

  watch(prefix: string, listener: KvChangeListener): () => void {
    const entry = { prefix, listener };
    this.watchers.add(entry);
    return () => this.watchers.delete(entry);
  }

  async notify(namespace: string, group: string, key: string, message: unknown): Promise<void> {
    this.emit({ namespace, group, key, kind: 'message', old_value: undefined, new_value: message });
  }

  async close(): Promise<void> {}
}

/** A broadcast within one process: what every process would hear. */
export class LocalBroadcast implements StreamBroadcast {
  private readonly listeners = new Set<(message: StreamMessage) => void>();
  readonly published: StreamMessage[] = [];

  async publish(message: StreamMessage): Promise<void> {
    this.published.push(message);
    for (const listener of this.listeners) listener(message);
  }

  subscribe(listener: (message: StreamMessage) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
