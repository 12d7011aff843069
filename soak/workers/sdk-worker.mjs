// An iii-sdk (0.22.1) worker for the memory soak (soak/run.ts). Env: III_URL, run with OTEL_ENABLED=false.
//
// ROLE=main   the long-lived routes the steady load uses:
//               GET  /soak/hello  {"ok":true}
//               POST /soak/echo   echoes the request body
//               GET  /soak/throw  the handler throws (the SDK answers invocation_failed: HTTP 500)
//             and soak::main::add (no route) for churn workers' worker-to-worker calls.
// ROLE=churn  KEY=<unique id>, FUNCS=<n>: soak::<KEY>::f0…f<n-1> on GET /soak/churn/<KEY>/f<i>, where f0
//             calls soak::main::add through the engine, plus an onRequest middleware scoped to
//             /soak/churn/<KEY> that lets every request continue.
// Prints "registered" once every registration is handed to the SDK (the SDK confirms nothing: the soak
// polls a route to know it is served). SIGTERM: a clean shutdown (the socket closes), then exit 0.
import { registerWorker } from 'iii-sdk';

const role = process.env.ROLE ?? 'churn';
const key = process.env.KEY ?? 'x';
const worker = registerWorker(process.env.III_URL, {
  workerName: `soak-${role}`,
  reconnectionConfig: { initialDelayMs: 200, maxDelayMs: 1000 },
});
const headers = { 'content-type': 'application/json' };

function route(functionId, method, path, handler) {
  worker.registerFunction(functionId, handler);
  worker.registerTrigger({ type: 'http', function_id: functionId, config: { api_path: path, http_method: method } });
}

if (role === 'main') {
  worker.registerFunction('soak::main::add', async (data) => ({ sum: Number(data?.a ?? 0) + Number(data?.b ?? 0) }));
  route('soak::main::echo', 'POST', '/soak/echo', async (req) => ({ status_code: 200, headers, body: req.body }));
  route('soak::main::throw', 'GET', '/soak/throw', async () => {
    throw new Error('soak handler failure');
  });
  route('soak::main::hello', 'GET', '/soak/hello', async () => ({ status_code: 200, headers, body: { ok: true } }));
} else {
  const funcs = Number(process.env.FUNCS ?? 3);
  const mwId = `soak::${key}::mw`;
  worker.registerFunction(mwId, async () => ({ action: 'continue' }));
  worker.registerTrigger({ type: 'http_middleware', function_id: mwId, config: { phase: 'onRequest', scope: { path: `/soak/churn/${key}` } } });
  for (let i = funcs - 1; i >= 0; i--) {
    const id = `soak::${key}::f${i}`;
    route(id, 'GET', `/soak/churn/${key}/f${i}`, async (req) => {
      if (i !== 0) return { status_code: 200, headers, body: { key, f: i, rid: req.request_id } };
      const result = await worker.trigger({ function_id: 'soak::main::add', payload: { a: i, b: 2 } });
      return { status_code: 200, headers, body: { key, f: i, sum: result.sum } };
    });
  }
}
process.stdout.write('registered\n');

process.on('SIGTERM', async () => {
  await worker.shutdown();
  process.exit(0);
});
