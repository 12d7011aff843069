import type { Logger } from 'pino';
import WebSocket from 'ws';
import type { StreamFunctions } from './stream-functions.js';
import type { StreamTriggers } from './stream-triggers.js';
import type { Subscriber, SubscriptionRegistry } from './subscription-registry.js';
import type { ClientMessage, ClientSubscription, StreamEvent } from './stream-wire.js';
import { decodeClientMessage, joinLeaveEvent, streamMessage } from './stream-wire.js';

/** A frame's text: ws hands over a Buffer, or fragments. Binary frames are read as JSON text too, as iii. */
function textOf(data: WebSocket.RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data as ArrayBuffer).toString('utf8');
}

/** Close codes the engine sends a stream client (docs/stream.md#limits). */
export const CLOSE_SLOW_CLIENT = 1013;
export const CLOSE_POLICY = 1008;
export const CLOSE_GOING_AWAY = 1001;
/** A dropped client that does not answer the close frame is cut after this long. */
const CLOSE_GRACE_MS = 2000;

export interface StreamClientLimits {
  /** Bytes queued for the client beyond which it is dropped as too slow. */
  maxBufferedBytes: number;
  /** Subscriptions one connection may hold. */
  maxSubscriptions: number;
  /** Client messages waiting to be handled (joins wait for handlers); more end the connection. */
  maxPendingMessages: number;
}

/** Why a client was dropped or refused: too slow, too many subscriptions, messages, or connections. */
export type DropReason = 'slow' | 'subscriptions' | 'pending' | 'connections';

export interface StreamClientDeps {
  registry: SubscriptionRegistry;
  functions: StreamFunctions;
  triggers: StreamTriggers;
  limits: StreamClientLimits;
  logger: Logger;
  onDropped(reason: DropReason): void;
  onMessage(kind: 'join' | 'leave' | 'invalid'): void;
}

/**
 * One client socket on the stream port: its subscriptions, iii's join/leave handling (handlers,
 * refusal, the initial `sync`), and the bound on what it may cost the engine: a client that does not
 * read fast enough is dropped (close 1013), never buffered without end.
 */
export class StreamClient implements Subscriber {
  private readonly subscriptions = new Map<string, ClientSubscription>();
  private queue: Promise<void> = Promise.resolve();
  private pending = 0;
  private dropped = false;
  private closed = false;

  constructor(
    private readonly socket: WebSocket,
    /** What the `auth_function` answered for this connection (its `context`), or null. */
    private readonly context: unknown,
    private readonly deps: StreamClientDeps,
  ) {
    socket.on('message', (data) => this.received(textOf(data)));
    socket.on('close', () => this.closedBySocket());
    socket.on('error', (err) => deps.logger.debug({ err }, 'stream client socket error'));
  }

  get subscriptionCount(): number {
    return this.subscriptions.size;
  }

  send(text: string): void {
    if (this.dropped || this.socket.readyState !== WebSocket.OPEN) return;
    if (this.socket.bufferedAmount + text.length > this.deps.limits.maxBufferedBytes) {
      this.drop('slow', CLOSE_SLOW_CLIENT, 'client too slow');
      return;
    }
    this.socket.send(text);
  }

  /** Ends the connection (engine closing): 1001, the client may reconnect elsewhere. */
  close(): void {
    if (this.socket.readyState === WebSocket.OPEN || this.socket.readyState === WebSocket.CONNECTING) this.socket.close(CLOSE_GOING_AWAY, 'engine closing');
  }

  terminate(): void {
    this.socket.terminate();
  }

  private drop(reason: DropReason, code: number, text: string): void {
    if (this.dropped) return;
    this.dropped = true;
    this.deps.onDropped(reason);
    this.deps.logger.warn({ reason, subscriptions: this.subscriptions.size, bufferedBytes: this.socket.bufferedAmount }, 'stream client dropped');
    // Stop delivering at once; the subscriptions go when the socket has closed.
    for (const subscription of this.subscriptions.values()) this.deps.registry.remove(this, subscription);
    this.socket.close(code, text);
    setTimeout(() => this.socket.terminate(), CLOSE_GRACE_MS).unref();
  }

  private received(text: string): void {
    if (this.dropped || text.trim() === '') return;
    const decoded = decodeClientMessage(text);
    if (!decoded.ok) {
      this.deps.onMessage('invalid');
      this.deps.logger.warn({ reason: decoded.reason }, 'stream client message ignored');
      return;
    }
    if (this.pending >= this.deps.limits.maxPendingMessages) {
      this.drop('pending', CLOSE_POLICY, 'too many pending messages');
      return;
    }
    this.pending++;
    // One message at a time per connection, in the order sent (as iii reads its socket).
    this.queue = this.queue
      .then(() => this.handle(decoded.message))
      .catch((err: unknown) => this.deps.logger.error({ err }, 'stream client message failed'))
      .finally(() => this.pending--);
  }

  private async handle(message: ClientMessage): Promise<void> {
    if (this.closed || this.dropped) return;
    this.deps.onMessage(message.type);
    const subscription = message.data;
    const event = joinLeaveEvent(subscription, this.context);
    if (message.type === 'leave') {
      await this.deps.triggers.leave(event);
      this.unsubscribe(subscription.subscriptionId);
      return;
    }
    const timestamp = Date.now();
    const { unauthorized } = await this.deps.triggers.join(event);
    if (this.closed || this.dropped) return;
    if (unauthorized) {
      this.reply(subscription, { type: 'unauthorized' }, timestamp);
      return;
    }
    if (!this.subscriptions.has(subscription.subscriptionId) && this.subscriptions.size >= this.deps.limits.maxSubscriptions) {
      this.drop('subscriptions', CLOSE_POLICY, 'too many subscriptions');
      return;
    }
    this.unsubscribe(subscription.subscriptionId);
    this.subscriptions.set(subscription.subscriptionId, subscription);
    this.deps.registry.add(this, subscription);
    // The initial state: the item, or the whole group's items.
    const result =
      subscription.id === null
        ? await this.deps.functions.call('stream::list', { stream_name: subscription.streamName, group_id: subscription.groupId })
        : await this.deps.functions.call('stream::get', { stream_name: subscription.streamName, group_id: subscription.groupId, item_id: subscription.id });
    if (!result.ok) {
      this.deps.logger.error({ code: result.error.code, streamName: subscription.streamName }, 'stream client sync failed');
      return;
    }
    this.reply(subscription, { type: 'sync', data: result.value ?? null }, timestamp);
  }

  private reply(subscription: ClientSubscription, event: StreamEvent, timestamp: number): void {
    this.send(JSON.stringify(streamMessage(subscription.streamName, subscription.groupId, subscription.id, event, timestamp)));
  }

  private unsubscribe(subscriptionId: string): void {
    const held = this.subscriptions.get(subscriptionId);
    if (held === undefined) return;
    this.subscriptions.delete(subscriptionId);
    this.deps.registry.remove(this, held);
  }

  /** The socket is gone: its subscriptions end, each with its `stream:leave` handlers (as iii's cleanup). */
  private closedBySocket(): void {
    if (this.closed) return;
    this.closed = true;
    const left = [...this.subscriptions.values()];
    for (const subscription of left) this.deps.registry.remove(this, subscription);
    this.subscriptions.clear();
    void (async () => {
      await this.queue;
      for (const subscription of left) await this.deps.triggers.leave(joinLeaveEvent(subscription, this.context));
    })().catch((err: unknown) => this.deps.logger.error({ err }, 'stream:leave on close failed'));
  }
}
