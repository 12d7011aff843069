// Peer: a Fastify gateway with @fastify/reply-from in front of an upstream handler process
// (bench/workers/http-upstream.mjs, plain node:http, keep-alive). Prints "port=<n>". No Switchyard code.
import { spawn } from 'node:child_process';
import { URL, fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import replyFrom from '@fastify/reply-from';

const upstream = spawn(process.execPath, [fileURLToPath(new URL('../workers/http-upstream.mjs', import.meta.url))], { stdio: ['ignore', 'pipe', 'inherit'] });
const upstreamPort = await new Promise((resolve) => {
  upstream.stdout.on('data', (chunk) => {
    const found = /port=(\d+)/.exec(chunk.toString());
    if (found !== null) resolve(Number(found[1]));
  });
});
const app = Fastify({ logger: false });
await app.register(replyFrom, { base: `http://127.0.0.1:${upstreamPort}`, undici: { connections: 128, pipelining: 1 } });
app.get('/bench/hello', (_req, reply) => reply.from('/bench/hello'));
app.post('/bench/echo', (_req, reply) => reply.from('/bench/echo'));
await app.listen({ host: '127.0.0.1', port: 0 });
console.log(`port=${app.server.address().port}`);
