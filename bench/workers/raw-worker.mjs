// The cheapest possible worker: plain `ws`, answers every invocation at once. It separates engine
// cost from SDK cost in benchmarks. Env: III_URL, ROUTES ("GET /bench/hello,POST /bench/echo"), ECHO=1.
import WebSocket from 'ws';

const ws = new WebSocket(process.env.III_URL);
const routes = (process.env.ROUTES ?? 'GET /bench/hello').split(',').map((r) => r.trim().split(' '));
const echo = process.env.ECHO === '1';
const reply = JSON.stringify({ ok: true });

ws.on('open', () => {
  routes.forEach(([method, path], i) => {
    const id = `bench::f${i}`;
    ws.send(JSON.stringify({ type: 'registerfunction', id }));
    ws.send(JSON.stringify({ type: 'registertrigger', id: `t${i}`, trigger_type: 'http', function_id: id, config: { api_path: path, http_method: method } }));
  });
  ws.send(JSON.stringify({ type: 'ping' }));
});
ws.on('message', (data) => {
  const text = data.toString();
  if (text.includes('"pong"')) {
    process.stdout.write('registered\n');
    return;
  }
  if (!text.startsWith('{"type":"invokefunction"')) return;
  const m = JSON.parse(text);
  if (m.invocation_id === undefined) return;
  const body = echo ? JSON.stringify(m.data.body) : reply;
  ws.send(`{"type":"invocationresult","invocation_id":"${m.invocation_id}","function_id":"${m.function_id}","result":{"status_code":200,"headers":{"content-type":"application/json"},"body":${body}}}`);
});
ws.on('close', () => process.exit(0));
process.on('SIGTERM', () => ws.close());
