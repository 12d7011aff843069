// Baseline (3): baseline (2) in two node:cluster processes sharing the HTTP port, each owning its
// own worker. Prints "port=<n>" once both answer.
import cluster from 'node:cluster';
import { once } from 'node:events';
import { listenHttp, startWorker } from './common.mjs';

if (cluster.isPrimary) {
  const children = [cluster.fork(), cluster.fork()];
  const ports = await Promise.all(children.map((child) => once(child, 'message').then(([port]) => port)));
  console.log(`port=${ports[0]}`);
} else {
  process.send(await listenHttp(await startWorker()));
}
