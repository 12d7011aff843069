import { once } from 'node:events';
import pino from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { InvocationOutcome } from '../../src/invocation/invoker.js';
import type { StreamSettings } from '../../src/modules/stream/stream-module.js';
import { StreamModule } from '../../src/modules/stream/stream-module.js';
import type { StreamTriggerRecord } from '../../src/modules/stream/stream-triggers.js';
import { waitUntil } from '../support/logs.js';
import { LocalBroadcast, StubKvStore } from './stream-kv-stub.js';

const logger = pino({ level: 'silent' });

const SETTINGS: StreamSettings = {
  host: '127.0.0.1',
  port: 0,
  maxValueBytes: 1 << 20,
  maxMessageBytes: 4096,
  maxBufferedBytes: 1 << 20,
  maxSubscriptionsPerClient: 8,
  maxConnections: 100,
  maxPendingTriggerCalls: 100,
};

type Handler = (data: unknown) => unknown;

interface Harness {
  module: StreamModule;
  url: string;
  handlers: Record<string, Handler>;
  triggers: (StreamTriggerRecord & { type: string })[];
  calls: [string, unknown][];
  registry: Registry;
  call(id: string, input: unknown): Promise<unknown>;
}

const open: { module: StreamModule; sockets: WebSocket[] }[] = [];
afterEach(async () => {
  for (const h of open.splice(0)) {
    for (const s of h.sockets) s.terminate();
    await h.module.close();
  }
});

async function start(settings: Partial<StreamSettings> = {}): Promise<Harness & { sockets: WebSocket[] }> {
  const handlers: Record<string, Handler> = {};
  const triggers: (StreamTriggerRecord & { type: string })[] = [];
  const calls: [string, unknown][] = [];
  const registry = new Registry();
  const module = new StreamModule(
    { ...SETTINGS, ...settings },
    {
      store: new StubKvStore(),
      broadcast: new LocalBroadcast(),
      calls: {
        has: (id) => id in handlers,
        invoke: async (id, data): Promise<InvocationOutcome> => {
          calls.push([id, data]);
          const handler = handlers[id];
          if (handler === undefined) return { ok: false, failure: { source: 'engine', code: 'FUNCTION_UNAVAILABLE', message: id } };
          return { ok: true, value: await handler(data) };
        },
      },
      triggersOf: (type) => triggers.filter((t) => t.type === type),
      metricsRegistry: registry,
      logger,
    },
  );
  const port = await module.start();
  const fns = new Map(module.engineFunctions());
  const sockets: WebSocket[] = [];
  open.push({ module, sockets });
  return {
    module,
    url: `ws://127.0.0.1:${port}`,
    handlers,
    triggers,
    calls,
    registry,
    sockets,
    call: async (id, input) => {
      const result = await fns.get(id as never)?.(input);
      if (result === undefined || !result.ok) throw new Error(JSON.stringify(result));
      return result.value;
    },
  };
}

/** A client that keeps every frame it receives and can wait for the next ones. */
async function client(h: { url: string; sockets: WebSocket[] }, path = '/', headers: Record<string, string> = {}) {
  const socket = new WebSocket(`${h.url}${path}`, { headers });
  h.sockets.push(socket);
  const frames: Record<string, unknown>[] = [];
  const waiters: (() => void)[] = [];
  socket.on('message', (data) => {
    frames.push(JSON.parse((data as Buffer).toString('utf8')) as Record<string, unknown>);
    for (const w of waiters.splice(0)) w();
  });
  await once(socket, 'open');
  const next = async (count: number, timeoutMs = 5000): Promise<Record<string, unknown>[]> => {
    const deadline = Date.now() + timeoutMs;
    while (frames.length < count) {
      if (Date.now() > deadline) throw new Error(`waited for ${count} frames, got ${JSON.stringify(frames)}`);
      await new Promise<void>((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
    return frames.slice(0, count);
  };
  const join = (subscriptionId: string, streamName: string, groupId: string, id?: string) =>
    socket.send(JSON.stringify({ type: 'join', data: { subscriptionId, streamName, groupId, ...(id === undefined ? {} : { id }) } }));
  const leave = (subscriptionId: string, streamName: string, groupId: string) =>
    socket.send(JSON.stringify({ type: 'leave', data: { subscriptionId, streamName, groupId } }));
  return { socket, frames, next, join, leave };
}

describe('stream client socket', () => {
  it('syncs a group on join, then sends create, update and delete; leave stops them', async () => {
    const h = await start();
    await h.call('stream::set', { stream_name: 'todo', group_id: 'inbox', item_id: 'a', data: { n: 1 } });
    const c = await client(h);
    c.join('sub-1', 'todo', 'inbox');
    const [sync] = await c.next(1);
    expect(sync).toMatchObject({ type: 'stream', streamName: 'todo', groupId: 'inbox', id: null, event: { type: 'sync', data: [{ n: 1 }] } });
    expect(typeof sync?.timestamp).toBe('number');
    await h.call('stream::set', { stream_name: 'todo', group_id: 'inbox', item_id: 'b', data: { n: 2 } });
    await h.call('stream::set', { stream_name: 'todo', group_id: 'inbox', item_id: 'b', data: { n: 3 } });
    await h.call('stream::set', { stream_name: 'todo', group_id: 'other', item_id: 'x', data: 0 });
    await h.call('stream::delete', { stream_name: 'todo', group_id: 'inbox', item_id: 'a' });
    const frames = await c.next(4);
    expect(frames.slice(1).map((f) => [f.id, f.event])).toEqual([
      ['b', { type: 'create', data: { n: 2 } }],
      ['b', { type: 'update', data: { n: 3 } }],
      ['a', { type: 'delete', data: { n: 1 } }],
    ]);
    c.leave('sub-1', 'todo', 'inbox');
    // The leave is handled before the marker join below, and the marker's sync proves the order.
    c.join('marker', 'todo', 'nothing-here');
    await c.next(5);
    await h.call('stream::set', { stream_name: 'todo', group_id: 'inbox', item_id: 'c', data: 1 });
    await h.call('stream::set', { stream_name: 'todo', group_id: 'nothing-here', item_id: 'z', data: 1 });
    const after = await c.next(6);
    expect(after[5]).toMatchObject({ groupId: 'nothing-here', id: 'z' });
  });

  it('an item subscription syncs that item and hears only it; send reaches the group', async () => {
    const h = await start();
    const c = await client(h);
    c.join('one', 's', 'g', 'i');
    expect((await c.next(1))[0]).toMatchObject({ id: 'i', event: { type: 'sync', data: null } });
    await h.call('stream::set', { stream_name: 's', group_id: 'g', item_id: 'other', data: 1 });
    await h.call('stream::send', { stream_name: 's', group_id: 'g', id: 'i', type: 'poke', data: { x: 1 } });
    await h.call('stream::set', { stream_name: 's', group_id: 'g', item_id: 'i', data: 2 });
    const frames = await c.next(3);
    expect(frames.slice(1).map((f) => f.event)).toEqual([
      { type: 'event', event: { type: 'poke', data: { x: 1 } } },
      { type: 'create', data: 2 },
    ]);
  });

  it('passes the auth context to join/leave handlers, and a join handler can refuse', async () => {
    const h = await start({ authFunction: 'auth' });
    h.handlers.auth = (input) => ({ context: { user: (input as { query_params: Record<string, string[]> }).query_params.user?.[0] } });
    h.handlers.onJoin = (event) => ({ unauthorized: (event as { group_id: string }).group_id === 'secret' });
    h.handlers.onLeave = () => null;
    h.triggers.push({ id: 't1', type: 'stream:join', functionId: 'onJoin', config: {} });
    h.triggers.push({ id: 't2', type: 'stream:leave', functionId: 'onLeave', config: {} });
    const c = await client(h, '/?user=ann', { authorization: 'Bearer t' });
    c.join('a', 's', 'secret');
    expect((await c.next(1))[0]).toMatchObject({ groupId: 'secret', event: { type: 'unauthorized' } });
    c.join('b', 's', 'open');
    expect((await c.next(2))[1]).toMatchObject({ groupId: 'open', event: { type: 'sync', data: [] } });
    const auth = h.calls.find(([id]) => id === 'auth')?.[1] as Record<string, unknown>;
    expect(auth).toMatchObject({ path: '/', query_params: { user: ['ann'] }, headers: { authorization: 'Bearer t' } });
    expect(String(auth.addr)).toMatch(/^127\.0\.0\.1:\d+$/);
    const join = h.calls.find(([id, e]) => id === 'onJoin' && (e as { group_id: string }).group_id === 'open')?.[1];
    expect(join).toEqual({ subscription_id: 'b', stream_name: 's', group_id: 'open', id: null, context: { user: 'ann' } });
    c.socket.close();
    // The socket's end leaves its subscriptions, with their stream:leave handlers.
    await waitUntil(() => h.calls.some(([id]) => id === 'onLeave'), 5000, 'the stream:leave handler');
    expect(h.calls.find(([id]) => id === 'onLeave')?.[1]).toEqual({ subscription_id: 'b', stream_name: 's', group_id: 'open', id: null, context: { user: 'ann' } });
  });

  it('drops a client that does not read (close 1013) and counts it', async () => {
    const h = await start({ maxBufferedBytes: 64 * 1024 });
    const c = await client(h);
    c.join('a', 's', 'g');
    await c.next(1);
    const closed = once(c.socket, 'close');
    // Stop reading: the kernel buffers fill, then the engine's send buffer passes the limit.
    (c.socket as unknown as { _socket: { pause(): void } })._socket.pause();
    const big = 'x'.repeat(16 * 1024);
    for (let i = 0; i < 2000 && c.socket.readyState === WebSocket.OPEN; i++) {
      await h.call('stream::send', { stream_name: 's', group_id: 'g', type: 'fill', data: big });
      if (i % 50 === 0) await new Promise((r) => setImmediate(r));
      const drops = (await h.registry.getSingleMetricAsString('switchyard_stream_client_drops_total')).includes('reason="slow"} 1');
      if (drops) break;
    }
    expect(await h.registry.getSingleMetricAsString('switchyard_stream_client_drops_total')).toContain('reason="slow"} 1');
    (c.socket as unknown as { _socket: { resume(): void } })._socket.resume();
    const [code] = (await closed) as [number];
    expect(code).toBe(1013);
  });

  it('closes a client that holds too many subscriptions, and one that sends a frame over the limit', async () => {
    const h = await start({ maxSubscriptionsPerClient: 2 });
    const c = await client(h);
    const closed = once(c.socket, 'close');
    for (let i = 0; i < 3; i++) c.join(`s${i}`, 's', `g${i}`);
    const [code] = (await closed) as [number];
    expect(code).toBe(1008);
    const d = await client(h);
    const closedBig = once(d.socket, 'close');
    d.socket.send('x'.repeat(5000));
    const [bigCode] = (await closedBig) as [number];
    expect(bigCode).toBe(1009);
  });

  it('ignores messages it cannot read and keeps the connection', async () => {
    const h = await start();
    const c = await client(h);
    c.socket.send('not json');
    c.socket.send(JSON.stringify({ type: 'join', data: { streamName: 's' } }));
    c.socket.send('   ');
    c.join('ok', 's', 'g');
    expect((await c.next(1))[0]).toMatchObject({ event: { type: 'sync' } });
    expect(await h.registry.getSingleMetricAsString('switchyard_stream_client_messages_total')).toContain('kind="invalid"} 2');
  });
});
