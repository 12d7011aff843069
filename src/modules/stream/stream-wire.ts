import { dataRecord, isPlainObject } from '../../values.js';

/**
 * What travels on the stream client socket (port 3112) and in `stream` trigger payloads, in iii's
 * shapes (docs/stream.md#the-client-socket). Plain data and pure functions: no I/O.
 */

/** The `event` of a change message: a stored item changed, a sync, a custom event, or a refusal. */
export type StreamEvent =
  | { type: 'create'; data: unknown }
  | { type: 'update'; data: unknown }
  | { type: 'delete'; data: unknown }
  | { type: 'sync'; data: unknown }
  | { type: 'event'; event: { type: string; data: unknown } }
  | { type: 'unauthorized' };

/** iii's wrapper message: sent to subscribed clients, and the input of `stream` trigger handlers. */
export interface StreamMessage {
  type: 'stream';
  timestamp: number;
  streamName: string;
  groupId: string;
  /** The item, or null for a group-wide event (iii serializes its `None` as null). */
  id: string | null;
  event: StreamEvent;
}

/** What a broadcast carries, checked on arrival (it crossed a process boundary). */
export function isStreamMessage(value: unknown): value is StreamMessage {
  return (
    isPlainObject(value) &&
    value.type === 'stream' &&
    typeof value.streamName === 'string' &&
    typeof value.groupId === 'string' &&
    (value.id === null || typeof value.id === 'string') &&
    isPlainObject(value.event) &&
    typeof value.event.type === 'string'
  );
}

export function streamMessage(streamName: string, groupId: string, id: string | null, event: StreamEvent, timestamp = Date.now()): StreamMessage {
  return { type: 'stream', timestamp, streamName, groupId, id, event };
}

/** A client's `join` or `leave` (iii's `StreamIncomingMessage`). `id` set: one item; unset: the whole group. */
export interface ClientSubscription {
  subscriptionId: string;
  streamName: string;
  groupId: string;
  id: string | null;
}

export type ClientMessage = { type: 'join' | 'leave'; data: ClientSubscription };

export type ClientDecode = { ok: true; message: ClientMessage } | { ok: false; reason: string };

/**
 * Decodes one client frame. As iii: `{type: "join"|"leave", data: {subscriptionId, streamName,
 * groupId, id?}}`; unknown fields are ignored; anything else is refused with a reason (the caller
 * logs it and keeps the connection, as iii does).
 */
export function decodeClientMessage(text: string): ClientDecode {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'not JSON' };
  }
  if (!isPlainObject(raw)) return { ok: false, reason: 'not a JSON object' };
  if (raw.type !== 'join' && raw.type !== 'leave') return { ok: false, reason: `unknown message type ${JSON.stringify(raw.type)}` };
  const data = raw.data;
  if (!isPlainObject(data)) return { ok: false, reason: 'missing data' };
  const { subscriptionId, streamName, groupId, id } = data;
  if (typeof subscriptionId !== 'string') return { ok: false, reason: 'data.subscriptionId must be a string' };
  if (typeof streamName !== 'string') return { ok: false, reason: 'data.streamName must be a string' };
  if (typeof groupId !== 'string') return { ok: false, reason: 'data.groupId must be a string' };
  if (id !== undefined && id !== null && typeof id !== 'string') return { ok: false, reason: 'data.id must be a string or null' };
  return { ok: true, message: { type: raw.type, data: { subscriptionId, streamName, groupId, id: typeof id === 'string' ? id : null } } };
}

/** Whether a subscription receives a message: same stream and group, and the item it watches (or all). */
export function subscriptionMatches(subscription: ClientSubscription, message: Pick<StreamMessage, 'streamName' | 'groupId' | 'id'>): boolean {
  return (
    subscription.streamName === message.streamName &&
    subscription.groupId === message.groupId &&
    (subscription.id === null || subscription.id === message.id)
  );
}

/** The payload of `stream:join` / `stream:leave` handlers (iii's `StreamJoinLeaveEvent`). */
export interface JoinLeaveEvent {
  subscription_id: string;
  stream_name: string;
  group_id: string;
  id: string | null;
  context: unknown;
}

export function joinLeaveEvent(subscription: ClientSubscription, context: unknown): JoinLeaveEvent {
  return {
    subscription_id: subscription.subscriptionId,
    stream_name: subscription.streamName,
    group_id: subscription.groupId,
    id: subscription.id,
    context: context ?? null,
  };
}

/** What the `auth_function` receives when a client connects (iii's `StreamAuthInput`). */
export interface StreamAuthInput {
  headers: Record<string, string>;
  path: string;
  query_params: Record<string, string[]>;
  addr: string;
}

/** `?a=1&a=2&b` → `{a: ["1","2"], b: [""]}`; values as sent (not percent-decoded), as iii does. */
export function queryToMultiMap(query: string): Record<string, string[]> {
  const map = dataRecord<string[]>();
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const key = eq === -1 ? pair : pair.slice(0, eq);
    if (key === '') continue;
    const value = eq === -1 ? '' : pair.slice(eq + 1);
    (map[key] ??= []).push(value);
  }
  return { ...map };
}
