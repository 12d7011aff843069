// A worker meant to run as several copies (the chaos demo): every copy registers the same function and
// the same route, and the engine balances requests over the copies that are connected. Each answer says
// which copy served it, how many requests that copy has served, and echoes the caller's counter `?n=`,
// so a client loop can see requests move between copies as they are killed and restarted.
//
// Run several:  REPLICA_NAME=a node examples/replicated-worker.mjs &
//               REPLICA_NAME=b node examples/replicated-worker.mjs &
//               for n in 1 2 3 4; do curl -s "http://127.0.0.1:3111/replica?n=$n"; echo; done
// `?delay_ms=` (at most 10000) makes the answer slow, to have requests in flight while a copy is stopped.
import { hostname } from 'node:os';
import { registerWorker } from 'iii-sdk';

const name = process.env.REPLICA_NAME || `${hostname()}:${process.pid}`;
const MAX_DELAY_MS = 10_000;

const worker = registerWorker(process.env.III_URL ?? 'ws://127.0.0.1:49134', {
  workerName: `replica-${name}`,
  // Reconnect quickly after an engine replica goes away (the SDK's default backoff is slower).
  reconnectionConfig: { initialDelayMs: 200, maxDelayMs: 2000 },
  // Only needed when the engine's WorkerModule sets auth_token.
  headers: process.env.III_TOKEN ? { authorization: `Bearer ${process.env.III_TOKEN}` } : undefined,
});

let served = 0;

worker.registerFunction('replica::whoami', async (req) => {
  served += 1;
  const mine = served;
  const delay = Math.min(Math.max(Number(req.query_params.delay_ms) || 0, 0), MAX_DELAY_MS);
  if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
  return {
    status_code: 200,
    headers: { 'content-type': 'application/json', 'x-replica': name },
    body: {
      replica: name,
      pid: process.pid,
      served: mine,
      n: req.query_params.n ?? null,
      requestId: req.request_id,
    },
  };
});

worker.registerTrigger({ type: 'http', function_id: 'replica::whoami', config: { api_path: '/replica', http_method: 'GET' } });

console.log(JSON.stringify({ msg: 'replica started', replica: name, pid: process.pid }));

let stopping = false;
const stop = async (signal) => {
  if (stopping) return;
  stopping = true;
  console.log(JSON.stringify({ msg: 'replica stopping', replica: name, signal, served }));
  await worker.shutdown();
  process.exit(0);
};
process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));
