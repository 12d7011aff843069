// One replica of the chaos harness's function, written with the real iii-sdk (0.22.1). Every replica
// registers the same function and route; the handler echoes the caller's token from the body and the
// query, names itself, and hashes the token a few times (a little work, and a digest the client
// recomputes, so an answer cannot be mistaken for another request's).
// Env: III_URL (the node's worker port), CHAOS_REPLICA (its name); run with OTEL_ENABLED=false.
import { createHash } from 'node:crypto';
import { registerWorker } from 'iii-sdk';

const replica = process.env.CHAOS_REPLICA ?? `pid-${process.pid}`;
// Same as DIGEST_ROUNDS in chaos/load.ts, which recomputes the digest.
const DIGEST_ROUNDS = 32;

const worker = registerWorker(process.env.III_URL, {
  workerName: `chaos-${replica}`,
  // Reconnect fast after an engine child is killed (the SDK's default starts at 1 s).
  reconnectionConfig: { initialDelayMs: 100, maxDelayMs: 1000 },
});

function digestOf(token) {
  let digest = String(token);
  for (let i = 0; i < DIGEST_ROUNDS; i++) digest = createHash('sha256').update(digest).digest('hex');
  return digest.slice(0, 16);
}

worker.registerFunction('chaos::echo', async (req) => {
  const token = req.body !== null && typeof req.body === 'object' ? req.body.token : undefined;
  return {
    status_code: 200,
    headers: { 'content-type': 'application/json' },
    body: { token, query_token: req.query_params.token, digest: digestOf(token), replica, pid: process.pid },
  };
});
worker.registerTrigger({ type: 'http', function_id: 'chaos::echo', config: { api_path: '/chaos/echo', http_method: 'POST' } });

process.stdout.write(`${JSON.stringify({ msg: 'chaos replica started', replica, pid: process.pid })}\n`);

let stopping = false;
process.on('SIGTERM', () => {
  if (stopping) return;
  stopping = true;
  worker.shutdown().finally(() => process.exit(0));
});
