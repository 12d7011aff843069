// Baseline (5): two node:cluster processes sharing the HTTP port, the worker on one of them. The
// other relays every request it receives to the owner over baseline (4)'s stream, so with connections
// dealt round-robin about half the requests take the hop. Prints "port=<n>".
import cluster from 'node:cluster';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listenHttp, relayClient, relayServer, startWorker } from './common.mjs';

if (cluster.isPrimary) {
  const path = join(tmpdir(), `switchyard-baseline5-${process.pid}.sock`);
  const owner = cluster.fork({ ROLE: 'owner', RELAY_SOCKET: path });
  await once(owner, 'message');
  const relay = cluster.fork({ ROLE: 'relay', RELAY_SOCKET: path });
  const [port] = await once(relay, 'message');
  console.log(`port=${port}`);
} else if (process.env.ROLE === 'owner') {
  const path = process.env.RELAY_SOCKET;
  process.on('SIGTERM', () => process.exit(0));
  process.on('exit', () => rmSync(path, { force: true }));
  const invoke = await startWorker();
  await relayServer(path, invoke);
  process.send(await listenHttp(invoke));
} else {
  process.send(await listenHttp(await relayClient(process.env.RELAY_SOCKET)));
}
