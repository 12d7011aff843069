// COUNT raw `ws` workers in one process (the 1 000-connected-workers check): worker i registers
// function many::<i> and GET /many/<i>, and answers {"ok":true,"i":<i>}. Connections open CONCURRENCY
// at a time. Prints "registered <COUNT>" once every worker's ping (sent after its registrations) is
// answered. Env: III_URL, COUNT (default 1000), CONCURRENCY (default 50).
import WebSocket from 'ws';

const url = process.env.III_URL;
const count = Number(process.env.COUNT ?? 1000);
const concurrency = Number(process.env.CONCURRENCY ?? 50);
const sockets = [];
let registered = 0;

function open(i) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const fn = `many::${i}`;
    ws.on('open', () => {
      ws.send(JSON.stringify({ type: 'registerfunction', id: fn }));
      ws.send(JSON.stringify({ type: 'registertrigger', id: `many-${i}`, trigger_type: 'http', function_id: fn, config: { api_path: `/many/${i}`, http_method: 'GET' } }));
      ws.send('{"type":"ping"}');
    });
    ws.on('message', (data) => {
      const text = data.toString();
      if (text === '{"type":"pong"}') {
        registered++;
        resolve();
        return;
      }
      if (!text.startsWith('{"type":"invokefunction"')) return;
      const m = JSON.parse(text);
      if (m.invocation_id === undefined) return;
      ws.send(`{"type":"invocationresult","invocation_id":"${m.invocation_id}","function_id":"${fn}","result":{"status_code":200,"headers":{"content-type":"application/json"},"body":{"ok":true,"i":${i}}}}`);
    });
    ws.on('error', reject);
    sockets.push(ws);
  });
}

let next = 0;
async function lane() {
  while (next < count) await open(next++);
}
await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
process.stdout.write(`registered ${registered}\n`);

process.on('SIGTERM', () => {
  for (const ws of sockets) ws.terminate();
  process.exit(0);
});
