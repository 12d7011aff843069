import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import type { Invoker } from '../../src/invocation/invoker.js';
import { RawJson } from '../../src/invocation/raw-json.js';
import { RecentTraceOwners } from '../../src/observability/trace-owners.js';
import type { WorkerConnectionDeps } from '../../src/workers/worker-connection.js';
import { WorkerConnection } from '../../src/workers/worker-connection.js';
import { EngineFunctions } from '../../src/workers/engine-functions.js';
import { WorkerHub } from '../../src/workers/worker-hub.js';

/** A real ws pair over loopback; the engine side's TCP socket is wrapped to count cork/uncork. */
async function connectedPair(extra: Partial<WorkerConnectionDeps> = {}): Promise<{ connection: WorkerConnection; client: WebSocket; socket: Socket; corks: () => number; server: Server; hub: WorkerHub<WorkerConnection> }> {
  const server = createServer();
  const wss = new WebSocketServer({ noServer: true });
  let corks = 0;
  const accepted = new Promise<{ ws: WebSocket; socket: Socket }>((resolve) => {
    server.on('upgrade', (req, socket, head) => wss.handleUpgrade(req, socket, head, (ws) => resolve({ ws, socket: socket as Socket })));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`);
  const { ws, socket } = await accepted;
  await once(client, 'open');
  const transport = {
    cork: () => {
      corks++;
      socket.cork();
    },
    uncork: () => socket.uncork(),
  };
  const hub = new WorkerHub<WorkerConnection>('p1');
  const deps = { hub, invoker: {} as Invoker, logger: pino({ level: 'silent' }), ignoreTrailingSlash: false, workerCallTimeoutMs: 1000, engineFunctions: new EngineFunctions(), ...extra };
  const connection = new WorkerConnection(ws, deps, '127.0.0.1', transport);
  return { connection, client, socket, corks: () => corks, server, hub };
}

const opened: { client: WebSocket; server: Server }[] = [];
afterEach(() => {
  for (const { client, server } of opened.splice(0)) {
    client.terminate();
    server.close();
    server.closeAllConnections();
  }
});

describe('WorkerConnection sends', () => {
  it('batches the frames of one loop turn into one corked write, and uncorks after it', async () => {
    const pair = await connectedPair();
    opened.push(pair);
    const received: string[] = [];
    const allFive = new Promise<void>((resolve) =>
      pair.client.on('message', (data: Buffer) => {
        received.push(data.toString());
        if (received.length === 5) resolve();
      }),
    );
    for (let i = 0; i < 5; i++) pair.connection.fire(`fn::${i}`, { i });
    // Corked once for the five, and nothing has left yet: the write waits for the check phase.
    expect(pair.corks()).toBe(1);
    expect(pair.socket.writableCorked).toBe(1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(pair.socket.writableCorked).toBe(0);
    await allFive;
    expect(received.map((text) => (JSON.parse(text) as { function_id: string }).function_id)).toEqual([0, 1, 2, 3, 4].map((i) => `fn::${i}`));

    // A later turn corks again.
    pair.connection.fire('fn::later', {});
    expect(pair.corks()).toBe(2);
    await new Promise((resolve) => setImmediate(resolve));
    expect(pair.socket.writableCorked).toBe(0);
  });

  it('sends a body held as bytes in a text frame, the same bytes as the same data as text', async () => {
    const pair = await connectedPair();
    opened.push(pair);
    const frames: { data: Buffer; isBinary: boolean }[] = [];
    const both = new Promise<void>((resolve) =>
      pair.client.on('message', (data: Buffer, isBinary: boolean) => {
        frames.push({ data, isBinary });
        if (frames.length === 2) resolve();
      }),
    );
    const body = Buffer.from(JSON.stringify({ items: Array.from({ length: 3000 }, (_, i) => ({ i, name: `Zoë ☃ ${i}` })) }));
    const head = '{"path":"/p","body":';
    const tail = ',"response":{"channel_id":"c"}}';
    const trace = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', baggage: 'k=v' };
    void pair.connection.invoke('fn::echo', RawJson.spliced(head, body, tail), 50, trace).catch(() => undefined);
    void pair.connection.invoke('fn::echo', new RawJson(`${head}${body.toString()}${tail}`), 50, trace).catch(() => undefined);
    await both;
    expect(frames.map((f) => f.isBinary)).toEqual([false, false]);
    // The invocation ids differ; everything else is the same bytes.
    const [a, b] = frames.map((f) => f.data.toString('utf8').replace(/"invocation_id":"[^"]*"/, '"invocation_id":"x"'));
    expect(a).toBe(b);
    expect(frames[0]?.data.length).toBe(frames[1]?.data.length);
    expect((JSON.parse(a ?? '') as { data: { body: unknown } }).data.body).toStrictEqual(JSON.parse(body.toString()));
  });

  it('delivers a frame sent just before a close', async () => {
    const pair = await connectedPair();
    opened.push(pair);
    const messages: string[] = [];
    pair.client.on('message', (data: Buffer) => messages.push(data.toString()));
    const closed = once(pair.client, 'close');
    pair.connection.fire('fn::last', {});
    pair.connection.close(1001, 'going away');
    const [code] = (await closed) as [number];
    expect(code).toBe(1001);
    expect(messages).toHaveLength(1);
  });

  it('closes the worker with 1011 when handling its frame fails, and the engine goes on', async () => {
    const pair = await connectedPair();
    opened.push(pair);
    pair.connection.start();
    pair.hub.functionAdded = () => {
      throw new Error('a fault inside the engine');
    };
    const closed = once(pair.client, 'close');
    pair.client.send(JSON.stringify({ type: 'registerfunction', id: 'fn::faulty' }));
    const [code] = (await closed) as [number];
    expect(code).toBe(1011);
    await vi.waitFor(() => expect(pair.connection.closed).toBe(true));
  });
});

describe('WorkerConnection calls', () => {
  it("a worker's call under a trace notes the trace as the caller's too (a trace it shares with its callee names neither)", async () => {
    const owners = new RecentTraceOwners();
    const invoker: Invoker = { invoke: () => Promise.resolve({ ok: true, value: 1 }), fire: () => true, has: () => true };
    const pair = await connectedPair({ invoker, traces: owners });
    opened.push(pair);
    pair.connection.start();
    const trace = '0af7651916cd43dd8448eb211c80319c';
    const answered = new Promise<string>((resolve) => pair.client.on('message', (data: Buffer) => {
      if (data.toString().includes('"invocationresult"')) resolve(data.toString());
    }));
    pair.client.send(JSON.stringify({ type: 'invokefunction', invocation_id: 'c-1', function_id: 'other::fn', data: {}, traceparent: `00-${trace}-b7ad6b7169203331-01` }));
    expect(JSON.parse(await answered)).toMatchObject({ invocation_id: 'c-1', result: 1 });
    expect(owners.ownerOf(trace)).toBe(pair.connection.id);
  });
});
