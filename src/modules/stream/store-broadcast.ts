import type { KvStore } from '../storage/kv-store.js';
import type { StreamBroadcast } from './stream-fanout.js';
import { namespaceOf } from './stream-functions.js';

/**
 * The broadcast over the stream's own store (`notify`): the primary relays it to every child in an
 * embedded cluster, Redis pub/sub carries it between nodes, on the same path as the store's changes.
 * The fan-out (stream-fanout.ts) hears it among the changes, as a change of kind `message`.
 */
export function storeBroadcast(store: KvStore): StreamBroadcast {
  return {
    publish: (message) => store.notify(namespaceOf(message.streamName), message.groupId, message.id ?? '', message),
    // The store's watch delivers broadcasts with the changes already.
    subscribe: () => () => undefined,
  };
}
