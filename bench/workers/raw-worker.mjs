// The cheapest possible worker: plain `ws`, answers every invocation at once. It separates engine
// cost from SDK cost in benchmarks, and the baselines (bench/baselines/) drive the very same worker.
// Env:
//   III_URL     the engine's worker URL
//   ROUTES      "GET /bench/hello,POST /bench/echo": function bench::f<i> per route, answering
//               {"ok":true}, except POST routes, which echo the request body
//   ECHO=1      every route echoes the request body
//   MIDDLEWARE=1  also registers three http_middleware triggers (onRequest, preHandler, postHandler)
//               scoped to MIDDLEWARE_SCOPE (default /bench), answering {"action":"continue"}
// Prints "registered" once the engine has answered a ping sent after the registrations.
import WebSocket from 'ws';

const ws = new WebSocket(process.env.III_URL);
const routes = (process.env.ROUTES ?? 'GET /bench/hello').split(',').map((r) => r.trim().split(' '));
const echoAll = process.env.ECHO === '1';
const phases = process.env.MIDDLEWARE === '1' ? ['onRequest', 'preHandler', 'postHandler'] : [];
const scope = process.env.MIDDLEWARE_SCOPE ?? '/bench';
const OK = '{"status_code":200,"headers":{"content-type":"application/json"},"body":{"ok":true}}';
const CONTINUE = '{"action":"continue"}';
/** function id → what it answers: 'ok', 'echo' or 'continue'. */
const kinds = new Map();

ws.on('open', () => {
  routes.forEach(([method, path], i) => {
    const id = `bench::f${i}`;
    kinds.set(id, echoAll || method === 'POST' ? 'echo' : 'ok');
    ws.send(JSON.stringify({ type: 'registerfunction', id }));
    ws.send(JSON.stringify({ type: 'registertrigger', id: `t${i}`, trigger_type: 'http', function_id: id, config: { api_path: path, http_method: method } }));
  });
  phases.forEach((phase, i) => {
    const id = `bench::mw${i}`;
    kinds.set(id, 'continue');
    ws.send(JSON.stringify({ type: 'registerfunction', id }));
    ws.send(JSON.stringify({ type: 'registertrigger', id: `mw${i}`, trigger_type: 'http_middleware', function_id: id, config: { phase, scope: { path: scope } } }));
  });
  ws.send(JSON.stringify({ type: 'ping' }));
});
ws.on('message', (data) => {
  const text = data.toString();
  if (text === '{"type":"pong"}') {
    process.stdout.write('registered\n');
    return;
  }
  if (!text.startsWith('{"type":"invokefunction"')) return;
  const m = JSON.parse(text);
  if (m.invocation_id === undefined) return;
  const kind = kinds.get(m.function_id);
  const result =
    kind === 'continue'
      ? CONTINUE
      : kind === 'echo'
        ? `{"status_code":200,"headers":{"content-type":"application/json"},"body":${JSON.stringify(m.data.body) ?? 'null'}}`
        : OK;
  ws.send(`{"type":"invocationresult","invocation_id":"${m.invocation_id}","function_id":"${m.function_id}","result":${result}}`);
});
ws.on('close', () => process.exit(0));
process.on('SIGTERM', () => ws.close());
