import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { InvocationOutcome } from '../../src/invocation/invoker.js';
import { changeToMessage } from '../../src/modules/stream/stream-fanout.js';
import type { StreamCalls } from '../../src/modules/stream/stream-functions.js';
import { StreamFunctions } from '../../src/modules/stream/stream-functions.js';
import { StreamTriggers, checkStreamTriggerConfig, streamTriggerMatches } from '../../src/modules/stream/stream-triggers.js';
import type { StreamTriggerRecord } from '../../src/modules/stream/stream-triggers.js';
import type { StreamMessage } from '../../src/modules/stream/stream-wire.js';
import { decodeClientMessage, queryToMultiMap, streamMessage } from '../../src/modules/stream/stream-wire.js';
import { SubscriptionRegistry } from '../../src/modules/stream/subscription-registry.js';
import { StubKvStore } from './stream-kv-stub.js';

const logger = pino({ level: 'silent' });

/** Functions "registered by workers": a map from id to handler; every call is recorded. */
function fakeCalls(handlers: Record<string, (data: unknown) => unknown> = {}): StreamCalls & { log: [string, unknown][] } {
  const log: [string, unknown][] = [];
  return {
    log,
    has: (id) => id in handlers,
    invoke: async (id, data): Promise<InvocationOutcome> => {
      log.push([id, data]);
      const handler = handlers[id];
      if (handler === undefined) return { ok: false, failure: { source: 'engine', code: 'FUNCTION_UNAVAILABLE', message: `no ${id}` } };
      try {
        return { ok: true, value: await handler(data) };
      } catch (err) {
        return { ok: false, failure: { source: 'worker', code: 'invocation_failed', message: (err as Error).message } };
      }
    },
  };
}

function setup(handlers: Record<string, (data: unknown) => unknown> = {}, maxValueBytes = 1024) {
  const store = new StubKvStore();
  const calls = fakeCalls(handlers);
  const broadcast: StreamMessage[] = [];
  const fired: StreamMessage[] = [];
  const functions = new StreamFunctions({
    store,
    calls,
    broadcast: (m) => {
      broadcast.push(m);
      return Promise.resolve();
    },
    fireTriggers: (m) => fired.push(m),
    maxValueBytes,
  });
  return { store, calls, broadcast, fired, functions };
}

const item = { stream_name: 's', group_id: 'g', item_id: 'i' };

describe('stream functions against the store', () => {
  it('set answers old and new value (old null when created) and fires create then update', async () => {
    const { functions, fired, broadcast } = setup();
    expect(await functions.call('stream::set', { ...item, data: { v: 1 } })).toEqual({ ok: true, value: { old_value: null, new_value: { v: 1 } } });
    expect(await functions.call('stream::set', { ...item, data: { v: 2 } })).toEqual({ ok: true, value: { old_value: { v: 1 }, new_value: { v: 2 } } });
    expect(fired.map((m) => m.event)).toEqual([
      { type: 'create', data: { v: 1 } },
      { type: 'update', data: { v: 2 } },
    ]);
    expect(fired[0]).toMatchObject({ type: 'stream', streamName: 's', groupId: 'g', id: 'i' });
    // Store writes reach subscribers through the store's change events, not the broadcast.
    expect(broadcast).toEqual([]);
  });

  it('get answers the value, or null when absent', async () => {
    const { functions } = setup();
    expect(await functions.call('stream::get', item)).toEqual({ ok: true, value: null });
    await functions.call('stream::set', { ...item, data: [1, 2] });
    expect(await functions.call('stream::get', item)).toEqual({ ok: true, value: [1, 2] });
  });

  it('delete answers the old value and fires delete only when something was deleted', async () => {
    const { functions, fired } = setup();
    expect(await functions.call('stream::delete', item)).toEqual({ ok: true, value: { old_value: null } });
    expect(fired).toEqual([]);
    await functions.call('stream::set', { ...item, data: 'x' });
    expect(await functions.call('stream::delete', item)).toEqual({ ok: true, value: { old_value: 'x' } });
    expect(fired.at(-1)?.event).toEqual({ type: 'delete', data: 'x' });
  });

  it('update applies ops, omits empty errors, fires create or update', async () => {
    const { functions, fired } = setup();
    const first = await functions.call('stream::update', { ...item, ops: [{ type: 'increment', path: 'n', by: 2 }] });
    expect(first).toEqual({ ok: true, value: { old_value: null, new_value: { n: 2 } } });
    await functions.call('stream::update', { ...item, ops: [{ type: 'set', path: 'm', value: 'a' }] });
    expect(fired.map((m) => m.event.type)).toEqual(['create', 'update']);
  });

  it('list, list_groups and list_all read the stream namespaces', async () => {
    const { functions } = setup();
    await functions.call('stream::set', { ...item, data: 1 });
    await functions.call('stream::set', { ...item, item_id: 'j', data: 2 });
    await functions.call('stream::set', { stream_name: 's', group_id: 'h', item_id: 'k', data: 3 });
    await functions.call('stream::set', { stream_name: 'a', group_id: 'z', item_id: 'k', data: 3 });
    expect(await functions.call('stream::list', { stream_name: 's', group_id: 'g' })).toEqual({ ok: true, value: [1, 2] });
    expect(await functions.call('stream::list_groups', { stream_name: 's' })).toEqual({ ok: true, value: ['g', 'h'] });
    expect(await functions.call('stream::list_all', {})).toEqual({
      ok: true,
      value: { stream: [{ id: 'a', groups: ['z'] }, { id: 's', groups: ['g', 'h'] }], count: 2 },
    });
  });

  it('send broadcasts an event message (group-wide or to one item) and fires triggers, storing nothing', async () => {
    const { functions, broadcast, fired, store } = setup();
    expect(await functions.call('stream::send', { stream_name: 's', group_id: 'g', type: 'ping', data: { a: 1 } })).toEqual({ ok: true, value: null });
    expect(broadcast[0]).toMatchObject({ streamName: 's', groupId: 'g', id: null, event: { type: 'event', event: { type: 'ping', data: { a: 1 } } } });
    expect(fired).toHaveLength(1);
    expect(store.data.size).toBe(0);
  });

  it('refuses bad inputs with iii deserialization_error naming the field', async () => {
    const { functions } = setup();
    expect(await functions.call('stream::set', { stream_name: 's', group_id: 'g', data: 1 })).toEqual({
      ok: false,
      error: { code: 'deserialization_error', message: 'Failed to deserialize input for stream::set: missing field `item_id`' },
    });
    const wrongType = await functions.call('stream::get', { ...item, group_id: 5 });
    expect(wrongType.ok === false && wrongType.error.code).toBe('deserialization_error');
    const noData = await functions.call('stream::set', item);
    expect(noData.ok === false && noData.error.message).toContain('missing field `data`');
    const badOps = await functions.call('stream::update', { ...item, ops: [{ type: 'explode' }] });
    expect(badOps.ok === false && badOps.error.code).toBe('deserialization_error');
    const notObject = await functions.call('stream::list', 'nope');
    expect(notObject.ok === false && notObject.error.code).toBe('deserialization_error');
  });

  it('refuses a value over max_value_bytes with VALUE_TOO_LARGE, before writing', async () => {
    const { functions, store } = setup({}, 64);
    const result = await functions.call('stream::set', { ...item, data: 'x'.repeat(100) });
    expect(result.ok === false && result.error.code).toBe('VALUE_TOO_LARGE');
    expect(store.data.size).toBe(0);
    const sent = await functions.call('stream::send', { stream_name: 's', group_id: 'g', type: 't', data: 'x'.repeat(100) });
    expect(sent.ok === false && sent.error.code).toBe('VALUE_TOO_LARGE');
  });

  it('refuses an update whose resulting item would pass max_value_bytes, though its ops are small', async () => {
    const { functions, store, fired } = setup({}, 64);
    const grow = (path: string) => functions.call('stream::update', { ...item, ops: [{ type: 'set', path, value: 'x'.repeat(20) }] });
    expect((await grow('a')).ok).toBe(true);
    expect((await grow('b')).ok).toBe(true);
    const refused = await grow('c');
    expect(refused.ok === false && refused.error).toEqual({ code: 'VALUE_TOO_LARGE', message: 'value of 82 bytes exceeds the configured max_value_bytes limit of 64' });
    expect(await store.get('stream:s', 'g', 'i')).toEqual({ a: 'x'.repeat(20), b: 'x'.repeat(20) });
    expect(fired).toHaveLength(2);
  });

  it('answers iii store error codes when the store fails', async () => {
    const { functions, store } = setup();
    const codes: string[] = [];
    for (const [id, input] of [
      ['stream::set', { ...item, data: 1 }],
      ['stream::get', item],
      ['stream::delete', item],
      ['stream::update', { ...item, ops: [] }],
      ['stream::list', { stream_name: 's', group_id: 'g' }],
      ['stream::list_groups', { stream_name: 's' }],
      ['stream::list_all', {}],
    ] as const) {
      store.failNext = new Error('down');
      const result = await functions.call(id, input);
      codes.push(result.ok ? 'ok' : result.error.code);
    }
    expect(codes).toEqual([
      'STREAM_SET_ERROR',
      'STREAM_GET_ERROR',
      'STREAM_DELETE_ERROR',
      'STREAM_UPDATE_ERROR',
      'STREAM_GET_GROUP_ERROR',
      'STREAM_LIST_GROUPS_ERROR',
      'STREAM_LIST_ALL_ERROR',
    ]);
  });
});

describe('custom streams (createStream)', () => {
  it('serves a stream from the worker functions stream::<op>(<name>) and broadcasts its changes', async () => {
    const rows = new Map<string, unknown>();
    const { functions, calls, broadcast, fired, store } = setup({
      'stream::set(todo)': (d) => {
        const { item_id, data } = d as { item_id: string; data: unknown };
        const old = rows.get(item_id);
        rows.set(item_id, data);
        return { old_value: old, new_value: data };
      },
      'stream::get(todo)': (d) => rows.get((d as { item_id: string }).item_id) ?? null,
      'stream::delete(todo)': (d) => {
        const id = (d as { item_id: string }).item_id;
        const old = rows.get(id);
        rows.delete(id);
        return { old_value: old };
      },
      'stream::list(todo)': () => [...rows.values()],
      'stream::list_groups(todo)': () => ['x'],
    });
    const todo = { stream_name: 'todo', group_id: 'inbox', item_id: 't1' };
    expect(await functions.call('stream::set', { ...todo, data: { d: 1 } })).toEqual({ ok: true, value: { old_value: null, new_value: { d: 1 } } });
    expect(await functions.call('stream::get', todo)).toEqual({ ok: true, value: { d: 1 } });
    expect(await functions.call('stream::list', { stream_name: 'todo', group_id: 'inbox' })).toEqual({ ok: true, value: [{ d: 1 }] });
    expect(await functions.call('stream::list_groups', { stream_name: 'todo' })).toEqual({ ok: true, value: ['x'] });
    expect(await functions.call('stream::delete', todo)).toEqual({ ok: true, value: { old_value: { d: 1 } } });
    expect(store.data.size).toBe(0);
    expect(broadcast.map((m) => m.event.type)).toEqual(['create', 'delete']);
    expect(fired).toHaveLength(2);
    expect(calls.log[0]).toEqual(['stream::set(todo)', { ...todo, data: { d: 1 } }]);
  });

  it('answers iii errors for a custom write that fails, answers nothing, or lacks new_value', async () => {
    const { functions } = setup({
      'stream::set(a)': () => {
        throw new Error('boom');
      },
      'stream::set(b)': () => null,
      'stream::set(c)': () => ({ old_value: 1 }),
      'stream::get(a)': () => {
        throw new Error('get boom');
      },
    });
    const code = async (stream: string) => {
      const r = await functions.call('stream::set', { stream_name: stream, group_id: 'g', item_id: 'i', data: 1 });
      return r.ok ? 'ok' : r.error.code;
    };
    expect([await code('a'), await code('b'), await code('c')]).toEqual(['STREAM_SET_ERROR', 'STREAM_SET_ERROR', 'JSON_ERROR']);
    // A custom read's error goes back as the worker's own.
    expect(await functions.call('stream::get', { stream_name: 'a', group_id: 'g', item_id: 'i' })).toEqual({
      ok: false,
      error: { code: 'invocation_failed', message: 'get boom' },
    });
  });
});

describe('stream triggers', () => {
  const trig = (id: string, type: string, config: Record<string, unknown>): StreamTriggerRecord & { type: string } => ({ id, type, functionId: `fn::${id}`, config });

  it('matches on stream name, then group and item when set', () => {
    const m = streamMessage('s', 'g', 'i', { type: 'create', data: 1 });
    expect(streamTriggerMatches({ stream_name: 's' }, m)).toBe(true);
    expect(streamTriggerMatches({ stream_name: 't' }, m)).toBe(false);
    expect(streamTriggerMatches({ stream_name: 's', group_id: 'g', item_id: 'i' }, m)).toBe(true);
    expect(streamTriggerMatches({ stream_name: 's', group_id: 'h' }, m)).toBe(false);
    expect(streamTriggerMatches({ stream_name: 's', item_id: 'j' }, m)).toBe(false);
    expect(streamTriggerMatches({ stream_name: 's', item_id: 'i' }, streamMessage('s', 'g', null, { type: 'sync', data: 1 }))).toBe(false);
  });

  it('refuses a stream trigger without stream_name', () => {
    expect(checkStreamTriggerConfig('stream', {})).toMatch(/stream_name/);
    expect(checkStreamTriggerConfig('stream', { stream_name: 's', group_id: 3 })).toMatch(/group_id/);
    expect(checkStreamTriggerConfig('stream', { stream_name: 's' })).toBeUndefined();
    expect(checkStreamTriggerConfig('stream:join', {})).toBeUndefined();
  });

  it('runs handlers in order, skips on an explicit false condition, and bounds pending firings', async () => {
    const all = [trig('a', 'stream', { stream_name: 's', condition_function_id: 'cond' }), trig('b', 'stream', { stream_name: 's' })];
    let allow: unknown = false;
    const calls = fakeCalls({ cond: () => allow, 'fn::a': () => null, 'fn::b': () => null });
    let dropped = 0;
    const triggers = new StreamTriggers({
      triggersOf: (type) => all.filter((t) => t.type === type),
      calls,
      logger,
      maxPendingFirings: 1,
      dropped: () => dropped++,
    });
    triggers.fire(streamMessage('s', 'g', 'i', { type: 'create', data: 1 }));
    triggers.fire(streamMessage('s', 'g', 'i', { type: 'update', data: 2 }));
    expect(dropped).toBe(1);
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls.log.map(([id]) => id)).toEqual(['cond', 'fn::b']);
    allow = null;
    triggers.fire(streamMessage('s', 'g', 'i', { type: 'update', data: 3 }));
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls.log.map(([id]) => id).slice(2)).toEqual(['cond', 'fn::a', 'fn::b']);
  });

  it('join is refused only by an explicit unauthorized: true', async () => {
    const all = [trig('j1', 'stream:join', {}), trig('j2', 'stream:join', {})];
    let answer: unknown = { unauthorized: 'yes' };
    const calls = fakeCalls({ 'fn::j1': () => answer, 'fn::j2': () => ({}) });
    const triggers = new StreamTriggers({ triggersOf: (type) => all.filter((t) => t.type === type), calls, logger, maxPendingFirings: 10 });
    const event = { subscription_id: 'x', stream_name: 's', group_id: 'g', id: null, context: null };
    expect(await triggers.join(event)).toEqual({ unauthorized: false });
    answer = { unauthorized: true };
    expect(await triggers.join(event)).toEqual({ unauthorized: true });
    expect(calls.log.filter(([id]) => id === 'fn::j2')).toHaveLength(2);
  });
});

describe('stream wire and fan-out', () => {
  it('decodes join/leave as iii sends them and refuses anything else', () => {
    expect(decodeClientMessage('{"type":"join","data":{"subscriptionId":"1","streamName":"s","groupId":"g","id":"i","extra":1}}')).toEqual({
      ok: true,
      message: { type: 'join', data: { subscriptionId: '1', streamName: 's', groupId: 'g', id: 'i' } },
    });
    expect(decodeClientMessage('{"type":"leave","data":{"subscriptionId":"1","streamName":"s","groupId":"g"}}')).toMatchObject({ ok: true, message: { data: { id: null } } });
    expect(decodeClientMessage('nope').ok).toBe(false);
    expect(decodeClientMessage('{"type":"subscribe","data":{}}').ok).toBe(false);
    expect(decodeClientMessage('{"type":"join","data":{"subscriptionId":1,"streamName":"s","groupId":"g"}}').ok).toBe(false);
  });

  it('parses query parameters as iii: repeated keys kept, values as sent', () => {
    expect(queryToMultiMap('a=1&a=2&b=3&c=&&=x&d')).toEqual({ a: ['1', '2'], b: ['3'], c: [''], d: [''] });
  });

  it('turns store changes into iii change messages; a delete of nothing into none', () => {
    const base = { namespace: 'stream:s', group: 'g', key: 'i' };
    expect(changeToMessage({ ...base, kind: 'created', old_value: undefined, new_value: 1 })?.event).toEqual({ type: 'create', data: 1 });
    expect(changeToMessage({ ...base, kind: 'updated', old_value: 1, new_value: 2 })?.event).toEqual({ type: 'update', data: 2 });
    expect(changeToMessage({ ...base, kind: 'deleted', old_value: 2, new_value: undefined })?.event).toEqual({ type: 'delete', data: 2 });
    expect(changeToMessage({ ...base, kind: 'deleted', old_value: undefined, new_value: undefined })).toBeUndefined();
    expect(changeToMessage({ ...base, namespace: 'state', kind: 'created', old_value: undefined, new_value: 1 })).toBeUndefined();
  });

  it('delivers a message to the group subscriptions and item subscriptions that match, serialized once', () => {
    const registry = new SubscriptionRegistry();
    const got: Record<string, string[]> = { a: [], b: [], c: [] };
    const sub = (name: string) => ({ send: (text: string) => got[name]?.push(text) });
    const [a, b, c] = [sub('a'), sub('b'), sub('c')];
    registry.add(a, { subscriptionId: '1', streamName: 's', groupId: 'g', id: null });
    registry.add(a, { subscriptionId: '2', streamName: 's', groupId: 'g', id: 'i' });
    registry.add(b, { subscriptionId: '1', streamName: 's', groupId: 'g', id: 'j' });
    registry.add(c, { subscriptionId: '1', streamName: 's', groupId: 'h', id: null });
    expect(registry.size).toBe(4);
    const message = streamMessage('s', 'g', 'i', { type: 'update', data: 1 }, 5);
    expect(registry.deliver(message)).toBe(2);
    expect(got.a).toEqual([JSON.stringify(message), JSON.stringify(message)]);
    expect(got.a?.[0]).toBe(got.a?.[1]);
    expect(got.b).toEqual([]);
    expect(got.c).toEqual([]);
    registry.remove(a, { subscriptionId: '1', streamName: 's', groupId: 'g', id: null });
    registry.remove(a, { subscriptionId: '2', streamName: 's', groupId: 'g', id: 'i' });
    expect(registry.deliver(message)).toBe(0);
    expect(registry.size).toBe(2);
  });
});
