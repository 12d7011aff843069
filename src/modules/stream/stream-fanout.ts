import type { KvChange, KvStore } from '../storage/kv-store.js';
import { STREAM_NAMESPACE_PREFIX } from './stream-functions.js';
import type { SubscriptionRegistry } from './subscription-registry.js';
import type { StreamMessage } from './stream-wire.js';
import { isStreamMessage, streamMessage } from './stream-wire.js';

/**
 * Carries stream messages that no store write carries (`stream::send`, a custom stream's writes) to
 * every process of the cluster, this one included.
 */
export interface StreamBroadcast {
  publish(message: StreamMessage): Promise<void>;
  subscribe(listener: (message: StreamMessage) => void): () => void;
}

/** A store change of a stream item as iii's change message; a delete of nothing is no change. */
export function changeToMessage(change: KvChange): StreamMessage | undefined {
  if (!change.namespace.startsWith(STREAM_NAMESPACE_PREFIX)) return undefined;
  const streamName = change.namespace.slice(STREAM_NAMESPACE_PREFIX.length);
  const some = (value: unknown): boolean => value !== undefined && value !== null;
  switch (change.kind) {
    case 'deleted':
      return some(change.old_value) ? streamMessage(streamName, change.group, change.key, { type: 'delete', data: change.old_value }) : undefined;
    case 'created':
    case 'updated':
      return streamMessage(streamName, change.group, change.key, { type: some(change.old_value) ? 'update' : 'create', data: change.new_value ?? null });
    case 'message':
      // A broadcast (store-broadcast.ts): the message itself is the stream message.
      return isStreamMessage(change.new_value) ? change.new_value : undefined;
  }
}

/**
 * This process's half of the fan-out: every stream change in the cluster (from the store's change
 * events, in the order each key was written) and every broadcast message reach this process once,
 * and go to the subscriptions held here.
 */
export class StreamFanout {
  private stops: (() => void)[] = [];

  constructor(
    private readonly store: KvStore,
    private readonly broadcast: StreamBroadcast,
    private readonly registry: SubscriptionRegistry,
    private readonly onDelivered: (frames: number) => void,
  ) {}

  start(): void {
    if (this.stops.length > 0) return;
    this.stops = [
      this.store.watch(STREAM_NAMESPACE_PREFIX, (change) => {
        const message = changeToMessage(change);
        if (message !== undefined) this.deliver(message);
      }),
      this.broadcast.subscribe((message) => this.deliver(message)),
    ];
  }

  private deliver(message: StreamMessage): void {
    this.onDelivered(this.registry.deliver(message));
  }

  close(): void {
    for (const stop of this.stops) stop();
    this.stops = [];
  }
}
