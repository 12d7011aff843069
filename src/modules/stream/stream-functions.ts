import type { InvocationOutcome } from '../../invocation/invoker.js';
import type { WireError } from '../../protocol/messages.js';
import type { KvStore } from '../storage/kv-store.js';
import { isPlainObject } from '../../values.js';
import { isValueTooLarge } from '../storage/update-ops.js';
import type { Checked } from './stream-inputs.js';
import { readGroupInput, readItemInput, readSendInput, readSetInput, readStreamNameInput, readUpdateInput } from './stream-inputs.js';
import type { StreamEvent, StreamMessage } from './stream-wire.js';
import { streamMessage } from './stream-wire.js';

/** A stream function's answer as the calling worker sees it: a value, or `{code, message}`. */
export type StreamResult = { ok: true; value: unknown } | { ok: false; error: WireError };

/** Calls to functions anywhere in the cluster (the engine's invoker, with the module's deadline). */
export interface StreamCalls {
  has(functionId: string): boolean;
  /** `metadata`: the trigger's, passed on to its handler as iii does (stream.rs, connection.rs call_with_metadata). */
  invoke(functionId: string, data: unknown, metadata?: Record<string, unknown>): Promise<InvocationOutcome>;
}

export interface StreamFunctionDeps {
  store: KvStore;
  calls: StreamCalls;
  /**
   * Sends a message no store write carries (`stream::send`, a custom stream's writes) to the
   * subscribers of every process in the cluster. A store write reaches them by the store's own
   * change events instead (stream-fanout.ts).
   */
  broadcast(message: StreamMessage): Promise<void>;
  /** Fires the `stream` triggers matching a change, cluster-wide, once (stream-triggers.ts). */
  fireTriggers(message: StreamMessage): void;
  /** Largest `data` (and `ops`) accepted, as JSON bytes. */
  maxValueBytes: number;
}

/** The namespace of one stream in the shared store (kv-store.ts). */
export const STREAM_NAMESPACE_PREFIX = 'stream:';
export const namespaceOf = (streamName: string): string => `${STREAM_NAMESPACE_PREFIX}${streamName}`;

export const STREAM_FUNCTION_IDS = [
  'stream::set',
  'stream::get',
  'stream::delete',
  'stream::update',
  'stream::list',
  'stream::list_groups',
  'stream::list_all',
  'stream::send',
] as const;
export type StreamFunctionId = (typeof STREAM_FUNCTION_IDS)[number];

const fail = (code: string, message: string): StreamResult => ({ ok: false, error: { code, message } });
const done = (value: unknown): StreamResult => ({ ok: true, value });
const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));
/** iii's `Option<Value>`: absent and JSON null are both "none". */
const some = (value: unknown): boolean => value !== undefined && value !== null;

function invalid(id: StreamFunctionId, checked: Checked<unknown> & { ok: false }): StreamResult {
  return fail('deserialization_error', `Failed to deserialize input for ${id}: ${checked.message}`);
}

function outcomeError(outcome: InvocationOutcome & { ok: false }): WireError {
  const failure = outcome.failure;
  return { code: failure.code, message: failure.message };
}

/**
 * iii's `stream::*` functions (docs/stream.md#functions). A stream with a custom implementation
 * (`createStream` registers `stream::get(<name>)` … on a worker) is served by those functions
 * wherever they run in the cluster; any other by the shared store. Every write that changes an item
 * fires the matching `stream` triggers here, once, and reaches every subscriber in the cluster.
 */
export class StreamFunctions {
  constructor(private readonly deps: StreamFunctionDeps) {}

  call(id: StreamFunctionId, input: unknown): Promise<StreamResult> {
    switch (id) {
      case 'stream::set':
        return this.set(input);
      case 'stream::get':
        return this.get(input);
      case 'stream::delete':
        return this.delete(input);
      case 'stream::update':
        return this.update(input);
      case 'stream::list':
        return this.list(input);
      case 'stream::list_groups':
        return this.listGroups(input);
      case 'stream::list_all':
        return this.listAll();
      case 'stream::send':
        return this.send(input);
    }
  }

  private tooLarge(value: unknown): StreamResult | undefined {
    const size = Buffer.byteLength(JSON.stringify(value) ?? 'null');
    if (size <= this.deps.maxValueBytes) return undefined;
    return fail('VALUE_TOO_LARGE', `value of ${size} bytes exceeds the configured max_value_bytes limit of ${this.deps.maxValueBytes}`);
  }

  /** The custom implementation of `op` for a stream, when a worker serves one anywhere in the cluster. */
  private custom(op: string, streamName: string): string | undefined {
    const id = `stream::${op}(${streamName})`;
    return this.deps.calls.has(id) ? id : undefined;
  }

  /** A custom write's answer, as iii reads it: none is an error, a value without `new_value` a JSON_ERROR. */
  private async customWrite(id: string, input: unknown, code: string, needsNewValue: boolean): Promise<StreamResult> {
    const outcome = await this.deps.calls.invoke(id, input);
    if (!outcome.ok) return fail(code, `Failed to invoke function: ${outcome.failure.code}: ${outcome.failure.message}`);
    if (!some(outcome.value)) return fail(code, 'Function returned no result');
    if (!isPlainObject(outcome.value) || (needsNewValue && !('new_value' in outcome.value))) {
      return fail('JSON_ERROR', 'Failed to convert result to value: missing field `new_value`');
    }
    return done(outcome.value);
  }

  /** After a write: `stream` triggers here, and the subscribers everywhere (store writes: by their change event). */
  private changed(message: StreamMessage, viaStore: boolean): void {
    this.deps.fireTriggers(message);
    if (!viaStore) void this.deps.broadcast(message).catch(() => undefined);
  }

  private async set(input: unknown): Promise<StreamResult> {
    const checked = readSetInput(input);
    if (!checked.ok) return invalid('stream::set', checked);
    const { stream_name, group_id, item_id, data } = checked.value;
    const big = this.tooLarge(data);
    if (big !== undefined) return big;
    const customId = this.custom('set', stream_name);
    let result: { old_value?: unknown; new_value?: unknown };
    if (customId !== undefined) {
      const answer = await this.customWrite(customId, checked.value, 'STREAM_SET_ERROR', true);
      if (!answer.ok) return answer;
      result = answer.value as typeof result;
    } else {
      try {
        result = await this.deps.store.set(namespaceOf(stream_name), group_id, item_id, data);
      } catch (err) {
        return fail('STREAM_SET_ERROR', `Failed to set value: ${errorText(err)}`);
      }
    }
    const event: StreamEvent = some(result.old_value) ? { type: 'update', data: result.new_value } : { type: 'create', data: result.new_value };
    this.changed(streamMessage(stream_name, group_id, item_id, event), customId === undefined);
    return done({ old_value: result.old_value ?? null, new_value: result.new_value ?? null });
  }

  private async get(input: unknown): Promise<StreamResult> {
    const checked = readItemInput(input);
    if (!checked.ok) return invalid('stream::get', checked);
    const { stream_name, group_id, item_id } = checked.value;
    const customId = this.custom('get', stream_name);
    if (customId !== undefined) return this.passThrough(customId, checked.value);
    try {
      return done((await this.deps.store.get(namespaceOf(stream_name), group_id, item_id)) ?? null);
    } catch (err) {
      return fail('STREAM_GET_ERROR', `Failed to get value: ${errorText(err)}`);
    }
  }

  private async delete(input: unknown): Promise<StreamResult> {
    const checked = readItemInput(input);
    if (!checked.ok) return invalid('stream::delete', checked);
    const { stream_name, group_id, item_id } = checked.value;
    const customId = this.custom('delete', stream_name);
    let oldValue: unknown;
    if (customId !== undefined) {
      const answer = await this.customWrite(customId, checked.value, 'STREAM_DELETE_ERROR', false);
      if (!answer.ok) return answer;
      oldValue = (answer.value as { old_value?: unknown }).old_value;
    } else {
      try {
        oldValue = (await this.deps.store.delete(namespaceOf(stream_name), group_id, item_id)).old_value;
      } catch (err) {
        return fail('STREAM_DELETE_ERROR', `Failed to delete value: ${errorText(err)}`);
      }
    }
    if (some(oldValue)) this.changed(streamMessage(stream_name, group_id, item_id, { type: 'delete', data: oldValue }), customId === undefined);
    return done({ old_value: oldValue ?? null });
  }

  private async update(input: unknown): Promise<StreamResult> {
    const checked = readUpdateInput(input);
    if (!checked.ok) return invalid('stream::update', checked);
    const { stream_name, group_id, item_id, ops } = checked.value;
    const big = this.tooLarge(ops);
    if (big !== undefined) return big;
    const customId = this.custom('update', stream_name);
    let result: { old_value?: unknown; new_value?: unknown; errors?: unknown[] };
    if (customId !== undefined) {
      const answer = await this.customWrite(customId, checked.value, 'STREAM_UPDATE_ERROR', true);
      if (!answer.ok) return answer;
      result = answer.value as typeof result;
    } else {
      try {
        result = await this.deps.store.update(namespaceOf(stream_name), group_id, item_id, ops, this.deps.maxValueBytes);
      } catch (err) {
        if (isValueTooLarge(err)) return fail('VALUE_TOO_LARGE', err.message);
        return fail('STREAM_UPDATE_ERROR', `Failed to update value: ${errorText(err)}`);
      }
    }
    const event: StreamEvent = some(result.old_value) ? { type: 'update', data: result.new_value } : { type: 'create', data: result.new_value };
    this.changed(streamMessage(stream_name, group_id, item_id, event), customId === undefined);
    const errors = Array.isArray(result.errors) && result.errors.length > 0 ? { errors: result.errors } : {};
    return done({ old_value: result.old_value ?? null, new_value: result.new_value ?? null, ...errors });
  }

  private async list(input: unknown): Promise<StreamResult> {
    const checked = readGroupInput(input);
    if (!checked.ok) return invalid('stream::list', checked);
    const customId = this.custom('list', checked.value.stream_name);
    if (customId !== undefined) return this.passThrough(customId, checked.value);
    try {
      return done(await this.deps.store.list(namespaceOf(checked.value.stream_name), checked.value.group_id));
    } catch (err) {
      return fail('STREAM_GET_GROUP_ERROR', `Failed to get group: ${errorText(err)}`);
    }
  }

  private async listGroups(input: unknown): Promise<StreamResult> {
    const checked = readStreamNameInput(input);
    if (!checked.ok) return invalid('stream::list_groups', checked);
    const customId = this.custom('list_groups', checked.value.stream_name);
    if (customId !== undefined) return this.passThrough(customId, checked.value);
    try {
      return done(await this.deps.store.listGroups(namespaceOf(checked.value.stream_name)));
    } catch (err) {
      return fail('STREAM_LIST_GROUPS_ERROR', `Failed to list groups: ${errorText(err)}`);
    }
  }

  /** Every stream in the store with its groups, sorted by name (custom streams are not listed, as in iii). */
  private async listAll(): Promise<StreamResult> {
    try {
      const namespaces = await this.deps.store.listNamespaces(STREAM_NAMESPACE_PREFIX);
      const streams = await Promise.all(
        namespaces.map(async (namespace) => ({
          id: namespace.slice(STREAM_NAMESPACE_PREFIX.length),
          groups: [...(await this.deps.store.listGroups(namespace))].sort(),
        })),
      );
      const stream = streams.filter((s) => s.groups.length > 0).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      return done({ stream, count: stream.length });
    } catch (err) {
      return fail('STREAM_LIST_ALL_ERROR', `Failed to list stream: ${errorText(err)}`);
    }
  }

  /** A custom event to a group's (or one item's) subscribers; not stored. Fires `stream` triggers too, as iii. */
  private async send(input: unknown): Promise<StreamResult> {
    const checked = readSendInput(input);
    if (!checked.ok) return invalid('stream::send', checked);
    const { stream_name, group_id, id, type, data } = checked.value;
    const big = this.tooLarge(data);
    if (big !== undefined) return big;
    const message = streamMessage(stream_name, group_id, id, { type: 'event', event: { type, data } });
    this.deps.fireTriggers(message);
    try {
      await this.deps.broadcast(message);
    } catch (err) {
      return fail('STREAM_SEND_ERROR', `Failed to send event: ${errorText(err)}`);
    }
    return done(null);
  }

  private async passThrough(functionId: string, input: unknown): Promise<StreamResult> {
    const outcome = await this.deps.calls.invoke(functionId, input);
    return outcome.ok ? done(outcome.value ?? null) : { ok: false, error: outcomeError(outcome) };
  }
}
