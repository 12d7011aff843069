// Streaming routes written with iii-sdk's http() helper (@iii-dev/helpers/http), for bench/streaming.ts:
// GET /bench/download?bytes=N writes N bytes; POST /bench/upload reads the body and answers its size;
// GET /bench/sse?count=N&gap_ms=G writes N events, G ms apart, each carrying the time it was written
// (performance.timeOrigin + performance.now(), comparable across processes of one machine);
// GET /bench/sse-idle writes one event a second until the client leaves. Env: III_URL; run with
// OTEL_ENABLED=false. Prints "registered" once the registrations are handed to the SDK.
import { performance } from 'node:perf_hooks';
import { registerWorker } from 'iii-sdk';
import { http } from '@iii-dev/helpers/http';

const worker = registerWorker(process.env.III_URL, { workerName: 'bench-stream' });
const CHUNK = Buffer.alloc(64 * 1024, 0x61);
const wait = (stream) => new Promise((resolve) => stream.once('drain', resolve));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function route(id, method, path, handler) {
  worker.registerFunction(id, handler);
  worker.registerTrigger({ type: 'http', function_id: id, config: { api_path: path, http_method: method } });
}

route('bench::download', 'GET', '/bench/download', http(async (req, res) => {
  let left = Number(req.query_params.bytes);
  res.status(200);
  res.headers({ 'content-type': 'application/octet-stream' });
  while (left > 0) {
    const part = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
    left -= part.length;
    if (!res.stream.write(part)) await wait(res.stream);
  }
  res.stream.end();
}));
route('bench::upload', 'POST', '/bench/upload', http(async (req, res) => {
  let received = 0;
  for await (const chunk of req.request_body.stream) received += chunk.length;
  res.status(200);
  res.headers({ 'content-type': 'application/json' });
  res.stream.end(JSON.stringify({ received }));
}));
route('bench::sse', 'GET', '/bench/sse', http(async (req, res) => {
  const count = Number(req.query_params.count);
  const gapMs = Number(req.query_params.gap_ms ?? 0);
  res.status(200);
  res.headers({ 'content-type': 'text/event-stream' });
  for (let i = 0; i < count; i++) {
    if (!res.stream.write(`data: ${performance.timeOrigin + performance.now()}\n\n`)) await wait(res.stream);
    if (gapMs > 0) await sleep(gapMs);
  }
  res.stream.end();
}));
route('bench::sseIdle', 'GET', '/bench/sse-idle', http(async (_req, res) => {
  res.status(200);
  res.headers({ 'content-type': 'text/event-stream' });
  let open = true;
  res.stream.on('close', () => (open = false));
  res.stream.on('error', () => (open = false));
  while (open) {
    res.stream.write('data: tick\n\n');
    await sleep(1000);
  }
}));
process.stdout.write('registered\n');

process.on('SIGTERM', async () => {
  await worker.shutdown();
  process.exit(0);
});
