import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { DialFailure } from '../../src/forwarding/dial-peer.js';
import { dialPeer } from '../../src/forwarding/dial-peer.js';
import { ForwardClient } from '../../src/forwarding/forward-client.js';
import { encodeFrame } from '../../src/forwarding/forward-frames.js';
import { FORWARD_PROTOCOL_VERSION, encodeHelloOk, encodeReject } from '../../src/forwarding/forward-messages.js';
import { openTunnel } from '../../src/forwarding/tunnel-client.js';
import { waitUntil } from '../support/logs.js';

/** A fake forward listener on a Unix socket that answers any first bytes with `answer`. */
function fakePeer(answer: Buffer | undefined): { socketPath: string; server: Server; accepted: Socket[] } {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-dial-'));
  const socketPath = join(dir, 'peer.sock');
  const accepted: Socket[] = [];
  const server = createServer((socket) => {
    accepted.push(socket);
    socket.on('error', () => undefined);
    socket.once('data', () => {
      if (answer !== undefined) socket.write(answer);
    });
  });
  server.listen(socketPath);
  cleanups.push(() => {
    for (const socket of accepted) socket.destroy();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { socketPath, server, accepted };
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

const hello = (): Buffer => encodeFrame(['hi']);
const tunnelSettings = { secret: 's', cluster: 'c', selfPeerId: 'me', timeoutMs: 2000 };
const channel = { channelId: 'abc-1', key: 'k', direction: 'read' as const };

function dial(socketPath: string, onData?: (chunk: Buffer) => void, timeoutMs = 2000): Promise<{ ready: Socket } | { failed: DialFailure }> {
  return new Promise((resolve) => {
    dialPeer({ socketPath }, { hello, timeoutMs, ...(onData === undefined ? {} : { onData }) }, {
      ready: (socket) => resolve({ ready: socket }),
      failed: (failure) => resolve({ failed: failure }),
    });
  });
}

describe('dialPeer', () => {
  it('refuses a peer that answers with another protocol version, in both kinds of link', async () => {
    const peer = fakePeer(encodeFrame([1, FORWARD_PROTOCOL_VERSION + 1]));
    const reason = `peer speaks forward protocol version ${FORWARD_PROTOCOL_VERSION + 1}, this process ${FORWARD_PROTOCOL_VERSION}`;
    expect(await dial(peer.socketPath)).toEqual({ failed: { kind: 'failed', reason } });
    expect(await openTunnel({ socketPath: peer.socketPath }, tunnelSettings, channel)).toEqual({ ok: false, reason });
    const client = new ForwardClient({ socketPath: peer.socketPath }, { secret: 's', cluster: 'c', selfPeerId: 'me', logger: pino({ level: 'silent' }) });
    expect(await client.invoke('f', null, { deadline: performance.now() + 5000 })).toEqual({ dispatched: false, reason: expect.stringContaining(reason) });
    await client.close();
  });

  it("passes a refusal's reason on as the peer sent it", async () => {
    const peer = fakePeer(encodeReject('in_use'));
    expect(await dial(peer.socketPath)).toEqual({ failed: { kind: 'refused', reason: 'in_use' } });
    expect(await openTunnel({ socketPath: peer.socketPath }, tunnelSettings, channel)).toEqual({ ok: false, reason: 'in_use' });
  });

  it('hands the bytes that came right behind the answer to the reader first', async () => {
    const behind = Buffer.from('first bytes of the link');
    const peer = fakePeer(Buffer.concat([encodeHelloOk(), behind]));
    const received: Buffer[] = [];
    const viaOnData = await dial(peer.socketPath, (chunk) => received.push(Buffer.from(chunk)));
    expect('ready' in viaOnData).toBe(true);
    await waitUntil(() => Buffer.concat(received).length >= behind.length, 5000, 'the bytes behind the answer');
    expect(Buffer.concat(received).toString()).toBe(behind.toString());
    if ('ready' in viaOnData) viaOnData.ready.destroy();

    const opened = await openTunnel({ socketPath: peer.socketPath }, tunnelSettings, channel);
    if (!opened.ok) throw new Error(opened.reason);
    expect(opened.socket.isPaused()).toBe(true);
    const first = await new Promise<Buffer>((resolve) => opened.socket.once('data', resolve).resume());
    expect(first.toString()).toBe(behind.toString());
    opened.socket.destroy();
  });

  it('fails on a malformed answer, a silent peer and a missing one', async () => {
    expect(await dial(fakePeer(encodeFrame(['nonsense'])).socketPath)).toEqual({ failed: { kind: 'failed', reason: 'malformed handshake answer' } });
    expect(await dial(fakePeer(undefined).socketPath, undefined, 50)).toEqual({ failed: { kind: 'failed', reason: 'no handshake within 50 ms' } });
    expect(await dial('/nonexistent/switchyard/peer.sock')).toEqual({ failed: { kind: 'failed', reason: expect.stringContaining('ENOENT') } });
  });
});
