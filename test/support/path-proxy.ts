import { once } from 'node:events';
import { createConnection, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';

/**
 * A load balancer for the worker port in one test: each connection goes to the backend its first
 * request line names by path prefix (the longest one that matches), else to `fallback`. With
 * `/ws/channels/` pointed at another node than `/`, a worker's channel sockets land on that node on
 * purpose, as they may behind a real load balancer.
 */
export interface PathProxy {
  readonly url: string;
  /** Connections sent to each backend port so far. */
  readonly routed: Map<number, number>;
  close(): Promise<void>;
}

export async function startPathProxy(routes: Record<string, number>, fallback: number): Promise<PathProxy> {
  const sockets = new Set<Socket>();
  const routed = new Map<number, number>();
  const prefixes = Object.keys(routes).sort((a, b) => b.length - a.length);
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on('error', () => client.destroy());
    client.on('close', () => sockets.delete(client));
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const lineEnd = head.indexOf('\r\n');
      if (lineEnd === -1) return;
      client.off('data', onData);
      client.pause();
      const path = head.subarray(0, lineEnd).toString('latin1').split(' ')[1] ?? '/';
      const prefix = prefixes.find((p) => path.startsWith(p));
      const port = prefix === undefined ? fallback : (routes[prefix] as number);
      routed.set(port, (routed.get(port) ?? 0) + 1);
      const upstream = createConnection({ host: '127.0.0.1', port });
      sockets.add(upstream);
      const drop = (): void => {
        client.destroy();
        upstream.destroy();
      };
      upstream.on('error', drop).on('close', () => {
        sockets.delete(upstream);
        client.destroy();
      });
      client.on('close', () => upstream.destroy());
      upstream.write(head);
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    };
    client.on('data', onData);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('proxy has no port');
  return {
    url: `ws://127.0.0.1:${address.port}`,
    routed,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
