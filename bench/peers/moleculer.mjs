// Peer: what a user might pick instead of Switchyard — a moleculer-web gateway in this process, the
// handlers in a remote moleculer service process (bench/workers/moleculer-service.mjs), connected by
// moleculer's TCP transporter (static addresses, no UDP discovery) or, with TRANSPORT=nats, through a
// nats-server started here. GET /bench/hello and POST /bench/echo as the Switchyard workers serve them.
// Prints "port=<n>" once the gateway reaches the service. No Switchyard code.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { URL, fileURLToPath } from 'node:url';
import { ServiceBroker } from 'moleculer';
import ApiGateway from 'moleculer-web';

const freePort = () =>
  new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

let transporter;
if (process.env.TRANSPORT === 'nats') {
  const natsPort = await freePort();
  spawn('nats-server', ['-a', '127.0.0.1', '-p', String(natsPort)], { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 300));
  transporter = `nats://127.0.0.1:${natsPort}`;
} else {
  const [gatewayPort, servicePort] = [await freePort(), await freePort()];
  const urls = [`127.0.0.1:${gatewayPort}/gateway`, `127.0.0.1:${servicePort}/service`];
  transporter = (port) => ({ type: 'TCP', options: { udpDiscovery: false, port, urls } });
  const serviceTransporter = JSON.stringify(transporter(servicePort));
  spawn(process.execPath, [fileURLToPath(new URL('../workers/moleculer-service.mjs', import.meta.url))], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, TRANSPORTER: serviceTransporter, NODE_ID: 'service' },
  });
  transporter = transporter(gatewayPort);
}
if (typeof transporter === 'string') {
  spawn(process.execPath, [fileURLToPath(new URL('../workers/moleculer-service.mjs', import.meta.url))], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, TRANSPORTER: transporter, NODE_ID: 'service' },
  });
}

const broker = new ServiceBroker({ nodeID: 'gateway', transporter, logger: false, metrics: false, tracing: false });
broker.createService({
  name: 'api',
  mixins: [ApiGateway],
  settings: {
    port: 0,
    ip: '127.0.0.1',
    logRequest: false,
    logResponse: false,
    routes: [{ path: '/bench', aliases: { 'GET hello': 'bench.hello', 'POST echo': 'bench.echo' }, bodyParsers: { json: { limit: '1mb' } }, mappingPolicy: 'restrict' }],
  },
});
await broker.start();
await broker.waitForServices(['bench'], 30_000);
await broker.call('bench.hello');
const api = broker.getLocalService('api');
console.log(`port=${api.server.address().port}`);
process.on('SIGTERM', () => broker.stop().then(() => process.exit(0)));
