// Baseline (4): this process receives every request and hands it to a sibling process that owns the
// worker, over the cheapest hop: one persistent Unix-socket stream of length-prefixed frames,
// multiplexed by id, JSON text inside, writes batched per loop turn. Prints "port=<n>".
// RELAY_TCP=1: the hop is a TCP connection on loopback instead, as between two nodes (the two-node
// group's bare pair).
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { listenHttp, relayClient, relayServer, startWorker } from './common.mjs';

if (process.env.RELAY_SOCKET !== undefined) {
  // The sibling: owns the worker, serves the relay.
  const path = process.env.RELAY_SOCKET;
  process.on('SIGTERM', () => process.exit(0));
  const tcp = path === 'tcp';
  if (!tcp) process.on('exit', () => rmSync(path, { force: true }));
  process.send(await relayServer(tcp ? { host: '127.0.0.1', port: 0 } : path, await startWorker()));
} else {
  const path = process.env.RELAY_TCP === '1' ? 'tcp' : join(tmpdir(), `switchyard-baseline4-${process.pid}.sock`);
  const owner = fork(fileURLToPath(import.meta.url), { env: { ...process.env, RELAY_SOCKET: path } });
  const [address] = await once(owner, 'message');
  console.log(`port=${await listenHttp(await relayClient(address))}`);
}
