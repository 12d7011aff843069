// Server-Sent Events through the response channel: GET /ticks?count=N streams N events, one every
// 200 ms, each reaching the client as it is written. Run: node examples/sse-worker.mjs
import { registerWorker } from 'iii-sdk';
import { http } from '@iii-dev/helpers/http';

const worker = registerWorker(process.env.III_URL ?? 'ws://127.0.0.1:49134', {
  workerName: 'ticks',
  headers: process.env.III_TOKEN ? { authorization: `Bearer ${process.env.III_TOKEN}` } : undefined,
});

worker.registerFunction('ticks::stream', http(async (req, res) => {
  const count = Math.min(Number(req.query_params.count ?? 5), 100);
  res.status(200);
  res.headers({ 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (let i = 1; i <= count; i++) {
    res.stream.write(`id: ${i}\ndata: ${JSON.stringify({ tick: i, at: new Date().toISOString() })}\n\n`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  res.stream.end();
}));

worker.registerTrigger({ type: 'http', function_id: 'ticks::stream', config: { api_path: 'ticks', http_method: 'GET' } });

const stop = async () => {
  await worker.shutdown();
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
