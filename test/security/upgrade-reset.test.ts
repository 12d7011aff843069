// A client that resets its connection while the worker port refuses its upgrade must cost that
// connection only. Node removes its own error listener from a socket it hands to 'upgrade'; the engine
// once left such sockets without one, so a reset after a refused channel connect (what iii-sdk's writer
// does when its channel was closed under it) ended the engine process with an uncaught ECONNRESET.
import { once } from 'node:events';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../support/http.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';

/** Sends an upgrade, waits for the engine's refusal to start arriving, then resets the connection. */
async function upgradeThenReset(port: number, path: string): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
      'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
  );
  // A dead engine closes (or refuses) instead of answering: '' then, and the caller's match fails.
  const first = await Promise.race([once(socket, 'data').then(([data]) => data as Buffer), once(socket, 'close').then(() => Buffer.alloc(0))]);
  socket.resetAndDestroy();
  return first.toString('latin1').split('\r\n')[0] ?? '';
}

describe('a reset during a refused upgrade on the worker port', () => {
  let engine: EngineHandle;
  beforeAll(async () => {
    engine = await startEngine({ logLevel: 'info' });
  });
  afterAll(async () => {
    await engine?.stop();
  });

  it('costs that connection only: the engine keeps serving', async () => {
    const port = Number(new URL(engine.workerUrl).port);
    for (let i = 0; i < 30; i++) {
      // A channel that does not exist (404), and a path the worker port does not serve (404).
      expect(await upgradeThenReset(port, `/ws/channels/000000000000-${i}?key=nope&dir=write`)).toMatch(/^HTTP\/1\.1 404/);
      expect(await upgradeThenReset(port, `/not-a-worker-path-${i}`)).toMatch(/^HTTP\/1\.1 404/);
    }
    // Give a crash its moment, then check the process answers and never exited.
    await new Promise((r) => setTimeout(r, 200));
    expect((await http(`${engine.httpUrl}/nothing-here`)).status).toBe(404);
    expect(engine.child.exitCode).toBeNull();
    expect(engine.stderr.lines.join('\n')).not.toMatch(/ECONNRESET|Unhandled 'error'/);
  });
});
