import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { ForwardServer } from '../../src/forwarding/forward-server.js';
import { EchoInvoker } from './echo-invoker.js';
import { startHttpHop } from './http-hop.js';

/**
 * The far end of every hop in the bench, in its own process (as a peer is): the framed stream on a
 * Unix socket and on TCP loopback, and the HTTP alternative on a second Unix socket. Reports its
 * addresses over IPC and exits when the parent disconnects.
 */
export const BENCH_SECRET = 'bench-secret';
export const BENCH_CLUSTER = 'bench';

export interface ServerAddresses {
  framedSocketPath: string;
  tcpPort: number;
  httpSocketPath: string;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fwd-bench-'));
  const invoker = new EchoInvoker();
  const logger = pino({ level: 'warn' });
  const forward = new ForwardServer({
    socketPath: join(dir, 'framed.sock'),
    tcp: { host: '127.0.0.1', port: 0 },
    secret: BENCH_SECRET,
    cluster: BENCH_CLUSTER,
    invoker,
    logger,
  });
  const bound = await forward.start();
  const httpSocketPath = join(dir, 'http.sock');
  const http = await startHttpHop(httpSocketPath, invoker);
  const addresses: ServerAddresses = { framedSocketPath: bound.socketPath as string, tcpPort: bound.port as number, httpSocketPath };
  process.send?.(addresses);
  process.once('disconnect', () => {
    http.close();
    void forward.close().then(() => {
      rmSync(dir, { recursive: true, force: true });
      process.exit(0);
    });
  });
}

// Imported by the bench for its constants; started only when forked as the server.
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) void main();
