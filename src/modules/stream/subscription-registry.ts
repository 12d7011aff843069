import type { ClientSubscription, StreamMessage } from './stream-wire.js';

/** What the registry needs of a client: a way to send it one text frame. */
export interface Subscriber {
  send(text: string): void;
}

interface Entry {
  subscriber: Subscriber;
  subscription: ClientSubscription;
}

const groupKey = (streamName: string, groupId: string): string => `${streamName.length}:${streamName}${groupId}`;

/**
 * This process's client subscriptions, indexed by stream and group so that a change reaches only the
 * subscriptions of its group (docs/stream.md#fan-out). A message is serialized once, however many
 * subscribers get it. As iii, a client with two subscriptions matching one change gets it twice.
 */
export class SubscriptionRegistry {
  private readonly byGroup = new Map<string, Map<Subscriber, Map<string, Entry>>>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  add(subscriber: Subscriber, subscription: ClientSubscription): void {
    const key = groupKey(subscription.streamName, subscription.groupId);
    let bySubscriber = this.byGroup.get(key);
    if (bySubscriber === undefined) this.byGroup.set(key, (bySubscriber = new Map<Subscriber, Map<string, Entry>>()));
    let entries = bySubscriber.get(subscriber);
    if (entries === undefined) bySubscriber.set(subscriber, (entries = new Map<string, Entry>()));
    if (!entries.has(subscription.subscriptionId)) this.count++;
    entries.set(subscription.subscriptionId, { subscriber, subscription });
  }

  remove(subscriber: Subscriber, subscription: ClientSubscription): void {
    const key = groupKey(subscription.streamName, subscription.groupId);
    const bySubscriber = this.byGroup.get(key);
    const entries = bySubscriber?.get(subscriber);
    if (bySubscriber === undefined || entries === undefined) return;
    if (entries.delete(subscription.subscriptionId)) this.count--;
    if (entries.size === 0) bySubscriber.delete(subscriber);
    if (bySubscriber.size === 0) this.byGroup.delete(key);
  }

  /** Sends the message to every matching subscription; returns how many frames were sent. */
  deliver(message: StreamMessage): number {
    const bySubscriber = this.byGroup.get(groupKey(message.streamName, message.groupId));
    if (bySubscriber === undefined) return 0;
    let text: string | undefined;
    let sent = 0;
    for (const [subscriber, entries] of bySubscriber) {
      for (const { subscription } of entries.values()) {
        if (subscription.id !== null && subscription.id !== message.id) continue;
        text ??= JSON.stringify(message);
        subscriber.send(text);
        sent++;
      }
    }
    return sent;
  }
}
