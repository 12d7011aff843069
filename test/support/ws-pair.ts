import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import WebSocket, { WebSocketServer } from 'ws';

const open: { client: WebSocket; server: Server }[] = [];

/**
 * A real WebSocket pair over loopback: the engine's side (with the raw socket under it) and the
 * client's (`options` go to the `ws` client, e.g. `autoPong: false`). `closeWsPairs` ends them all.
 */
export async function wsPair(options: WebSocket.ClientOptions = {}): Promise<{ engine: WebSocket; raw: Duplex; client: WebSocket }> {
  const server = createServer();
  const wss = new WebSocketServer({ noServer: true });
  const accepted = new Promise<{ engine: WebSocket; raw: Duplex }>((resolve) =>
    server.on('upgrade', (req, socket, head) => wss.handleUpgrade(req, socket, head, (ws) => resolve({ engine: ws, raw: socket }))),
  );
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`, options);
  const { engine, raw } = await accepted;
  await once(client, 'open');
  open.push({ client, server });
  return { engine, raw, client };
}

/** Ends every pair made so far (an afterEach). */
export function closeWsPairs(): void {
  for (const { client, server } of open.splice(0)) {
    client.terminate();
    server.close();
    server.closeAllConnections();
  }
}
