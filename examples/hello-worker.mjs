// A plain worker: one function served as GET /hello/:name. Run: node examples/hello-worker.mjs
import { registerWorker } from 'iii-sdk';

const worker = registerWorker(process.env.III_URL ?? 'ws://127.0.0.1:49134', {
  workerName: 'hello',
  // Only needed when the engine's WorkerModule sets auth_token.
  headers: process.env.III_TOKEN ? { authorization: `Bearer ${process.env.III_TOKEN}` } : undefined,
});

worker.registerFunction('hello::greet', async (req) => ({
  status_code: 200,
  headers: { 'content-type': 'application/json' },
  body: { hello: req.path_params.name, query: req.query_params, requestId: req.request_id },
}));

worker.registerTrigger({ type: 'http', function_id: 'hello::greet', config: { api_path: '/hello/:name', http_method: 'GET' } });

const stop = async () => {
  await worker.shutdown();
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
