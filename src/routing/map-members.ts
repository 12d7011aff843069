// The route table's membership maps (route-table.ts): a key's set of members made and dropped with
// its first and last member, and a derived value stored or, when there is none, deleted.
import type { ChurnMap } from './churn-map.js';

export function addMember<K, V>(map: ChurnMap<K, Set<V>>, key: K, value: V): void {
  const set = map.get(key);
  if (set === undefined) map.set(key, new Set([value]));
  else set.add(value);
}

export function removeMember<K, V>(map: ChurnMap<K, Set<V>>, key: K, value: V): void {
  const set = map.get(key);
  if (set === undefined) return;
  set.delete(value);
  if (set.size === 0) map.delete(key);
}

export function setOrDelete<V>(map: { set(key: string, value: V): unknown; delete(key: string): unknown }, key: string, value: V | undefined): void {
  if (value === undefined) map.delete(key);
  else map.set(key, value);
}
