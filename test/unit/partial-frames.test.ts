// The partial-frame budget against a real ws server on loopback: it reads ws's receiver internals, so
// these tests pin them (a ws upgrade that renames them fails here, not silently in production).
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import type WebSocket from 'ws';
import { CHUNK_COST_BYTES, PartialFrameBudget, partialFrameBytes } from '../../src/workers/partial-frames.js';
import type { RawWebSocket } from '../support/raw-ws.js';
import { PONG, frameHeader, openRawWebSocket, sendOpenFragment, sendPartialFrame } from '../support/raw-ws.js';

const KiB = 1024;
const MiB = 1024 * KiB;

interface Harness {
  url: string;
  budget: PartialFrameBudget;
  /** Server-side sockets, in the order they connected. */
  sockets: WebSocket[];
  messages: number[];
  evictions: { held: number; total: number }[];
  close(): Promise<void>;
}

async function harness(maxBytes: number): Promise<Harness> {
  const evictions: { held: number; total: number }[] = [];
  const budget = new PartialFrameBudget(maxBytes, { onEvicted: (held, total) => evictions.push({ held, total }) });
  const wss = new WebSocketServer({ noServer: true, maxPayload: 16 * MiB });
  const sockets: WebSocket[] = [];
  const messages: number[] = [];
  const server: Server = createServer();
  server.on('upgrade', (request, socket: Duplex, head: Buffer) => {
    wss.handleUpgrade(request, socket, head, (ws) => {
      budget.track(ws, socket);
      sockets.push(ws);
      ws.on('message', (data: Buffer) => messages.push(data.length));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    budget,
    sockets,
    messages,
    evictions,
    close: async () => {
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`never happened: ${what}`);
}

describe('PartialFrameBudget', () => {
  const open: { close(): Promise<void> }[] = [];
  const clients: RawWebSocket[] = [];
  afterEach(async () => {
    for (const client of clients.splice(0)) client.socket.destroy();
    for (const h of open.splice(0)) await h.close();
  });
  const start = async (maxBytes: number): Promise<Harness> => {
    const h = await harness(maxBytes);
    open.push(h);
    return h;
  };
  const connect = async (h: Harness): Promise<RawWebSocket> => {
    const client = await openRawWebSocket(h.url);
    clients.push(client);
    expect(client.status).toBe(101);
    return client;
  };

  it('counts the bytes of an unfinished frame (ws internals), and nothing once it completes', async () => {
    const h = await start(64 * MiB);
    const client = await connect(h);
    await until(() => h.sockets.length === 1, 'connected');
    await sendPartialFrame(client, 2 * MiB, MiB);
    await until(() => h.budget.held >= MiB, 'the megabyte counted');
    const counted = partialFrameBytes(h.sockets[0] as WebSocket) as number;
    // The payload sent, the frame header, and each buffered chunk's cost.
    expect(counted).toBeGreaterThanOrEqual(MiB);
    expect(counted).toBeLessThan(MiB + 14 + (MiB / 1024 + 16) * CHUNK_COST_BYTES);
    expect(h.budget.held).toBe(counted);
    client.socket.write(Buffer.alloc(MiB, 0x61));
    await until(() => h.messages.length === 1, 'the message complete');
    await until(() => h.budget.held === 0, 'nothing counted');
    expect(h.messages).toEqual([2 * MiB]);
  });

  it('counts the fragments of an unfinished fragmented message kept alive with pongs', async () => {
    const h = await start(64 * MiB);
    const client = await connect(h);
    await sendOpenFragment(client, MiB, 20);
    await until(() => h.budget.held >= MiB, 'the fragment counted');
    // Pongs between fragments are read and leave the fragment counted.
    await new Promise((r) => setTimeout(r, 100));
    expect(h.budget.held).toBeGreaterThanOrEqual(MiB);
    // More fragments, a pong between each: the count reads ws's running total of the fragments
    // (`_messageLength`, pinned here against the fragments themselves) rather than summing them.
    for (let i = 0; i < 8; i++) client.socket.write(Buffer.concat([frameHeader(KiB, 'continuation', false), Buffer.alloc(KiB), PONG]));
    await until(() => h.budget.held >= MiB + 8 * KiB, 'the fragments counted');
    const receiver = (h.sockets[0] as unknown as { _receiver: { _fragments: Buffer[]; _messageLength: number } })._receiver;
    expect(receiver._fragments.length).toBeGreaterThan(1);
    expect(receiver._messageLength).toBe(receiver._fragments.reduce((sum, f) => sum + f.length, 0));
    expect(receiver._messageLength).toBe(MiB + 8 * KiB);
    client.socket.write(Buffer.concat([frameHeader(KiB, 'continuation', true), Buffer.alloc(KiB)]));
    await until(() => h.messages.length === 1, 'the message complete');
    await until(() => h.budget.held === 0, 'nothing counted');
    expect(h.messages).toEqual([MiB + 9 * KiB]);
  });

  it('past the budget closes the socket whose unfinished message is oldest, and forgets closed sockets', async () => {
    const h = await start(8 * MiB);
    const first = await connect(h);
    const second = await connect(h);
    await sendPartialFrame(first, 8 * MiB, 3 * MiB);
    await until(() => h.budget.held >= 3 * MiB, 'the first counted');
    await sendPartialFrame(second, 8 * MiB, 3 * MiB);
    await until(() => h.budget.held >= 6 * MiB, 'both counted');
    // A third socket's message goes past 8 MiB: the first (oldest) is cut, the others stay.
    const third = await connect(h);
    await sendPartialFrame(third, 4 * MiB, 3 * MiB);
    await first.closed;
    await until(() => h.budget.held >= 6 * MiB && h.evictions.length === 1, 'the third counted');
    expect(h.evictions[0]?.held).toBeGreaterThanOrEqual(3 * MiB);
    expect(h.budget.held).toBeLessThanOrEqual(8 * MiB);
    expect(second.socket.destroyed).toBe(false);
    // The third finishes its message: young again, and nothing left of it.
    third.socket.write(Buffer.alloc(MiB, 0x61));
    await until(() => h.messages.length === 1, 'the third message complete');
    await until(() => h.budget.held < 4 * MiB, 'only the second counted');
    second.socket.destroy();
    await until(() => h.budget.held === 0 && h.budget.size === 1, 'closed sockets forgotten');
  });

  it('a socket whose message begins now is younger than one stalled mid-message, however long it was connected', async () => {
    const h = await start(8 * MiB);
    const idle = await connect(h);
    // Connected first, idle: a pong only.
    idle.socket.write(PONG);
    const stalled = await connect(h);
    await sendPartialFrame(stalled, 8 * MiB, 5 * MiB);
    await until(() => h.budget.held >= 5 * MiB, 'the stalled message counted');
    await sendPartialFrame(idle, 6 * MiB, 4 * MiB);
    await stalled.closed;
    expect(idle.socket.destroyed).toBe(false);
    idle.socket.write(Buffer.alloc(2 * MiB, 0x61));
    await until(() => h.messages.length === 1, 'the idle socket\'s message complete');
    expect(h.messages).toEqual([6 * MiB]);
  });
});
