// A worker with middleware (see docs/middleware.md):
//   - timing::start  onRequest  over /secure (priority -10: runs first) stamps the arrival time in the context
//   - auth::bearer   onRequest  over /secure/* answers 401 unless `Authorization: Bearer $API_TOKEN`
//   - timing::log    onResponse over /secure logs one JSON line: request id, method, path, status, duration
//   - GET /secure/profile, a route the auth middleware guards
//
// Run: API_TOKEN=s3cret node examples/middleware-worker.mjs
//      curl -i http://127.0.0.1:3111/secure/profile                               # 401
//      curl -i -H 'Authorization: Bearer s3cret' http://127.0.0.1:3111/secure/profile   # 200
import { createHash, timingSafeEqual } from 'node:crypto';
import { registerWorker } from 'iii-sdk';

const token = process.env.API_TOKEN;
if (!token) {
  console.error('middleware-worker: set API_TOKEN (the bearer token /secure/* requires)');
  process.exit(1);
}

const worker = registerWorker(process.env.III_URL ?? 'ws://127.0.0.1:49134', {
  workerName: 'middleware-example',
  // Only needed when the engine's WorkerModule sets auth_token.
  headers: process.env.III_TOKEN ? { authorization: `Bearer ${process.env.III_TOKEN}` } : undefined,
});

// Compare digests in constant time: the comparison must not leak how much of a guess was right.
const digest = (value) => createHash('sha256').update(value).digest();
const expected = digest(`Bearer ${token}`);
const authorized = (header) => typeof header === 'string' && timingSafeEqual(digest(header), expected);

// onRequest, first in the phase: stamp the arrival time. Context travels with the request to every later
// phase, so onResponse can compute the duration even when it runs on another replica of this worker.
worker.registerFunction('timing::start', async () => ({ action: 'continue', context: { received_at: Date.now() } }));
worker.registerTrigger({
  type: 'http_middleware',
  function_id: 'timing::start',
  config: { phase: 'onRequest', scope: { path: '/secure' }, priority: -10 },
});

// onRequest auth: `respond` ends the request before route matching; `continue` hands the identity to the handler.
worker.registerFunction('auth::bearer', async ({ request }) => {
  if (authorized(request.headers.authorization)) {
    return { action: 'continue', context: { user: { subject: 'token-holder' } } };
  }
  return {
    action: 'respond',
    response: {
      status_code: 401,
      headers: { 'www-authenticate': 'Bearer realm="switchyard-example"' },
      body: { error: 'unauthorized', request_id: request.request_id },
    },
  };
});
worker.registerTrigger({
  type: 'http_middleware',
  function_id: 'auth::bearer',
  config: { phase: 'onRequest', scope: { path: '/secure/*' } },
});

// onResponse: fire and forget after the reply was sent (it can neither delay nor change it); its result is ignored.
worker.registerFunction('timing::log', async ({ request, response, context }) => {
  const receivedAt = typeof context.received_at === 'number' ? context.received_at : undefined;
  console.log(
    JSON.stringify({
      msg: 'response',
      request_id: request.request_id,
      method: request.method,
      path: request.path,
      status: response.status_code,
      duration_ms: receivedAt === undefined ? null : Date.now() - receivedAt,
    }),
  );
  return { action: 'continue' };
});
worker.registerTrigger({
  type: 'http_middleware',
  function_id: 'timing::log',
  config: { phase: 'onResponse', scope: { path: '/secure' } },
});

worker.registerFunction('secure::profile', async (req) => ({
  status_code: 200,
  headers: { 'content-type': 'application/json' },
  body: { user: req.context.user, requestId: req.request_id },
}));
worker.registerTrigger({
  type: 'http',
  function_id: 'secure::profile',
  config: { api_path: '/secure/profile', http_method: 'GET' },
});

const stop = async () => {
  await worker.shutdown();
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
