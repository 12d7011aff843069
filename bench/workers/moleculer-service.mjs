// The remote service of the moleculer peer (bench/peers/moleculer.mjs): `bench.hello` answers
// {"ok":true}, `bench.echo` returns the body it is given — what the Switchyard workers do. Env:
// TRANSPORTER (a moleculer transporter config, JSON or a URL), NODE_ID.
import { ServiceBroker } from 'moleculer';

const transporter = process.env.TRANSPORTER.startsWith('{') ? JSON.parse(process.env.TRANSPORTER) : process.env.TRANSPORTER;
const broker = new ServiceBroker({ nodeID: process.env.NODE_ID ?? 'service', transporter, logger: false, metrics: false, tracing: false });
broker.createService({
  name: 'bench',
  actions: {
    hello: () => ({ ok: true }),
    echo: (ctx) => ctx.params,
  },
});
await broker.start();
process.on('SIGTERM', () => broker.stop().then(() => process.exit(0)));
