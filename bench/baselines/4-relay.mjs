// Baseline (4): this process receives every request and hands it to a sibling process that owns the
// worker, over the cheapest hop: one persistent Unix-socket stream of length-prefixed frames,
// multiplexed by id, JSON text inside, writes batched per loop turn. Prints "port=<n>".
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
  process.on('exit', () => rmSync(path, { force: true }));
  await relayServer(path, await startWorker());
  process.send('ready');
} else {
  const path = join(tmpdir(), `switchyard-baseline4-${process.pid}.sock`);
  const owner = fork(fileURLToPath(import.meta.url), { env: { ...process.env, RELAY_SOCKET: path } });
  await once(owner, 'message');
  console.log(`port=${await listenHttp(await relayClient(path))}`);
}
