// The raw worker's routes, written with iii-sdk: GET /bench/hello answers {"ok":true} (bench::f0),
// POST /bench/echo echoes the request body (bench::f1). Env: III_URL; run with OTEL_ENABLED=false.
// Prints "registered" once the registrations are handed to the SDK (the SDK confirms nothing: poll
// the route to know it is served).
import { registerWorker } from 'iii-sdk';

const worker = registerWorker(process.env.III_URL, { workerName: 'bench-sdk' });
const headers = { 'content-type': 'application/json' };

worker.registerFunction('bench::f0', async () => ({ status_code: 200, headers, body: { ok: true } }));
worker.registerTrigger({ type: 'http', function_id: 'bench::f0', config: { api_path: '/bench/hello', http_method: 'GET' } });
worker.registerFunction('bench::f1', async (req) => ({ status_code: 200, headers, body: req.body }));
worker.registerTrigger({ type: 'http', function_id: 'bench::f1', config: { api_path: '/bench/echo', http_method: 'POST' } });
process.stdout.write('registered\n');

process.on('SIGTERM', async () => {
  await worker.shutdown();
  process.exit(0);
});
