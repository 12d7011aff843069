import type { WireFunction, WireSnapshot, WireTrigger, WireWorker } from './wire-snapshot.js';
import { changedSpan, isPlainObject } from '../values.js';

/**
 * Bus protocol 2 (docs/scale.md): a peer's change as the records added or changed (`set`) and the keys
 * of those removed (`del`), from one version of its snapshot to the next. A receiver holding `from`
 * applies it; any other version held means a gap (resync that peer) or a duplicate (ignore).
 */
export interface WireDelta {
  ownerId: string;
  from: number;
  to: number;
  publishedAt?: number;
  /** Present when it changed; null when it was removed. */
  endpoint?: NonNullable<WireSnapshot['endpoint']> | null;
  set: Partial<{ [K in ListName]: readonly ListItem<K>[] }>;
  del: Partial<Record<ListName, readonly string[]>>;
}

type Lists = Required<Pick<WireSnapshot, 'functions' | 'triggers' | 'workers' | 'departed' | 'triggerTypes' | 'customTriggers'>>;
export type ListName = keyof Lists;
type ListItem<K extends ListName> = Lists[K][number];

export const LIST_NAMES: readonly ListName[] = ['functions', 'triggers', 'workers', 'departed', 'triggerTypes', 'customTriggers'];

/** A record's identity within its list: the same id may be registered by two workers of one peer. */
export function recordKey(list: ListName, record: unknown): string {
  const r = record as { id?: unknown; workerId?: unknown };
  if (list === 'workers') return String(r.id);
  if (list === 'departed') return String(r.workerId);
  return `${String(r.workerId)}\n${String(r.id)}`;
}

/** JSON of a record, cached per object (records are never mutated once built or parsed). */
const texts = new WeakMap<object, string>();
function textOf(record: object): string {
  let text = texts.get(record);
  if (text === undefined) {
    text = JSON.stringify(record);
    texts.set(record, text);
  }
  return text;
}

function keyed(list: ListName, records: readonly object[] | undefined): Map<string, object> | undefined {
  const map = new Map<string, object>();
  for (const record of records ?? []) {
    const key = recordKey(list, record);
    if (map.has(key)) return undefined; // not keyable: the caller sends the whole snapshot
    map.set(key, record);
  }
  return map;
}

const NO_RECORDS: readonly object[] = Object.freeze([]);

/**
 * Each list's records by key, as the last diff made them for the list as it was then: the next diff
 * starts from it instead of keying every record again. A diff takes the entry of the list it starts
 * from (and turns it into the new list's), so an entry is used once; a miss keys the list anew.
 */
const keyedLists = new WeakMap<readonly object[], Map<string, object>>();

/**
 * The change of one list: the records between the longest head and tail the two lists share (by
 * identity) are compared by key, the rest are the same records. Undefined when the new list holds two
 * records under one key. An owner's records change a few at a time, together (a worker registering,
 * leaving, a delta): the cost is a walk of pointer comparisons plus the records that changed.
 */
function diffList(list: ListName, before: readonly object[], after: readonly object[], set: object[], del: string[]): boolean {
  let map = keyedLists.get(before);
  if (map === undefined) {
    map = keyed(list, before);
    if (map === undefined) return false;
  }
  keyedLists.delete(before);
  const { head, endBefore, endAfter } = changedSpan(before, after);
  const replaced = new Map<string, object>();
  for (let i = head; i < endBefore; i++) {
    const record = before[i] as object;
    replaced.set(recordKey(list, record), record);
  }
  const kept = new Set<string>();
  for (let i = head; i < endAfter; i++) {
    const record = after[i] as object;
    const key = recordKey(list, record);
    const held = replaced.get(key);
    if (held === undefined) {
      if (map.has(key)) return false; // a second record under a key the list holds
    } else if (kept.has(key)) {
      return false;
    }
    kept.add(key);
    map.set(key, record);
    if (held === undefined || (held !== record && textOf(held) !== textOf(record))) set.push(record);
  }
  for (const key of replaced.keys()) {
    if (kept.has(key)) continue;
    map.delete(key);
    del.push(key);
  }
  keyedLists.set(after, map);
  return true;
}

/**
 * What changed from `prev` to `next` (one owner), or undefined when a list holds two records under one
 * key (then only a full snapshot describes it). Work: the records that changed, plus a walk of pointer
 * comparisons over the lists that changed (diffList).
 */
export function diffSnapshots(prev: WireSnapshot, next: WireSnapshot): WireDelta | undefined {
  const delta: WireDelta = { ownerId: next.ownerId, from: prev.version, to: next.version, set: {}, del: {} };
  if (next.publishedAt !== undefined) delta.publishedAt = next.publishedAt;
  if (JSON.stringify(prev.endpoint) !== JSON.stringify(next.endpoint)) delta.endpoint = next.endpoint ?? null;
  for (const list of LIST_NAMES) {
    const before = prev[list] ?? NO_RECORDS;
    const after = next[list] ?? NO_RECORDS;
    if (before === after) {
      // Unchanged, but a list that cannot be keyed still goes whole.
      if (keyedLists.has(after)) continue;
      const map = keyed(list, after);
      if (map === undefined) return undefined;
      keyedLists.set(after, map);
      continue;
    }
    const set: object[] = [];
    const del: string[] = [];
    if (!diffList(list, before, after, set, del)) return undefined;
    if (set.length > 0) (delta.set as Record<string, object[]>)[list] = set;
    if (del.length > 0) delta.del[list] = del;
  }
  return delta;
}

/** Structural check of a delta's envelope fields (its records are checked like a snapshot's). */
export function isDelta(v: unknown): v is WireDelta {
  if (!isPlainObject(v) || typeof v.ownerId !== 'string' || v.ownerId.length === 0) return false;
  if (!Number.isFinite(v.from) || !Number.isFinite(v.to) || (v.to as number) <= (v.from as number)) return false;
  if (!isPlainObject(v.set) || !isPlainObject(v.del)) return false;
  for (const list of LIST_NAMES) {
    const set = v.set[list];
    const del = v.del[list];
    if (set !== undefined && !Array.isArray(set)) return false;
    if (del !== undefined && !(Array.isArray(del) && del.every((k) => typeof k === 'string'))) return false;
  }
  return v.endpoint === undefined || v.endpoint === null || isPlainObject(v.endpoint);
}

/** The records of a delta as a snapshot (for the record checks of snapshot-check.ts). */
export function deltaAsSnapshot(delta: WireDelta): WireSnapshot {
  const { set } = delta;
  return {
    ownerId: delta.ownerId,
    version: delta.to,
    functions: set.functions ?? [],
    triggers: set.triggers ?? [],
    ...(set.workers === undefined ? {} : { workers: set.workers }),
    ...(set.departed === undefined ? {} : { departed: set.departed }),
    ...(set.triggerTypes === undefined ? {} : { triggerTypes: set.triggerTypes }),
    ...(set.customTriggers === undefined ? {} : { customTriggers: set.customTriggers }),
    ...(delta.endpoint === undefined || delta.endpoint === null ? {} : { endpoint: delta.endpoint }),
  };
}

interface Chain {
  version: number;
  lists: Record<ListName, Map<string, object>>;
  endpoint: WireSnapshot['endpoint'];
  publishedAt: number | undefined;
}

export type DeltaOutcome =
  | { result: 'applied'; snapshot: WireSnapshot }
  /** Not newer than what is held. */
  | { result: 'duplicate' }
  /** Unknown peer, or `from` is not the version held: resync that peer. */
  | { result: 'gap'; held: number | undefined };

/**
 * A receiver's copy of each peer's records, kept by key so a delta costs what it carries plus one
 * array copy of the peer's records (pointer copies: records are checked once, when they arrive).
 * Plain logic over data: RedisBus feeds it, the unit tests drive it directly.
 */
export class PeerChains {
  private readonly chains = new Map<string, Chain>();

  version(peerId: string): number | undefined {
    return this.chains.get(peerId)?.version;
  }

  /** A full snapshot (join, resync, checkpoint): replaces what is held when newer. */
  full(snapshot: WireSnapshot): WireSnapshot | undefined {
    const held = this.chains.get(snapshot.ownerId);
    if (held !== undefined && held.version >= snapshot.version) return undefined;
    const lists = {} as Record<ListName, Map<string, object>>;
    for (const list of LIST_NAMES) {
      const map = new Map<string, object>();
      for (const record of snapshot[list] ?? []) map.set(recordKey(list, record), record);
      lists[list] = map;
    }
    this.chains.set(snapshot.ownerId, { version: snapshot.version, lists, endpoint: snapshot.endpoint, publishedAt: snapshot.publishedAt });
    return snapshot;
  }

  delta(delta: WireDelta): DeltaOutcome {
    const chain = this.chains.get(delta.ownerId);
    if (chain === undefined) return { result: 'gap', held: undefined };
    if (delta.to <= chain.version) return { result: 'duplicate' };
    if (delta.from !== chain.version) return { result: 'gap', held: chain.version };
    for (const list of LIST_NAMES) {
      const map = chain.lists[list];
      for (const key of delta.del[list] ?? []) map.delete(key);
      for (const record of (delta.set[list] ?? []) as readonly object[]) map.set(recordKey(list, record), record);
    }
    if (delta.endpoint !== undefined) chain.endpoint = delta.endpoint ?? undefined;
    chain.version = delta.to;
    chain.publishedAt = delta.publishedAt;
    return { result: 'applied', snapshot: this.materialize(delta.ownerId, chain) };
  }

  drop(peerId: string): void {
    this.chains.delete(peerId);
  }

  private materialize(ownerId: string, chain: Chain): WireSnapshot {
    const { lists } = chain;
    const snapshot: WireSnapshot = {
      ownerId,
      version: chain.version,
      functions: [...lists.functions.values()] as WireFunction[],
      triggers: [...lists.triggers.values()] as WireTrigger[],
      workers: [...lists.workers.values()] as WireWorker[],
    };
    if (lists.departed.size > 0) snapshot.departed = [...lists.departed.values()] as NonNullable<WireSnapshot['departed']>;
    if (lists.triggerTypes.size > 0) snapshot.triggerTypes = [...lists.triggerTypes.values()] as NonNullable<WireSnapshot['triggerTypes']>;
    if (lists.customTriggers.size > 0) snapshot.customTriggers = [...lists.customTriggers.values()] as NonNullable<WireSnapshot['customTriggers']>;
    if (chain.endpoint !== undefined) snapshot.endpoint = chain.endpoint;
    if (chain.publishedAt !== undefined) snapshot.publishedAt = chain.publishedAt;
    return snapshot;
  }
}
