// Baseline (6), streaming: the least an engine must do to stream bodies to and from an iii-sdk
// handler over iii's channels. node:http takes the request, sends the worker one invokefunction with
// `request_body` and `response` channel refs, and joins the worker's channel sockets to the HTTP
// request and response, with back-pressure both ways: one ws socket per body. The worker is the
// bench's own iii-sdk worker (bench/workers/stream-worker.mjs, the `http()` helper), the same one
// the Switchyard side runs, so the pair measures the engine. One process, no validation, no
// timeouts, no cluster. Prints "port=<n>" once the worker's routes are registered. No Switchyard code.
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { URL, fileURLToPath } from 'node:url';
import { WebSocketServer } from 'ws';

const server = createServer();
await new Promise((resolve) => server.listen({ host: '127.0.0.1', port: 0 }, resolve));
const wss = new WebSocketServer({ noServer: true });
const routes = new Map();
const channels = new Map();
let worker;
let sequence = 0;
let registered;
const ready = new Promise((resolve) => (registered = resolve));

server.on('upgrade', (req, socket, head) => {
  wss.handleUpgrade(req, socket, head, (ws) => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/') return onWorker(ws);
    const channel = channels.get(url.pathname.slice('/ws/channels/'.length));
    if (channel === undefined) return ws.close();
    channel(ws, socket);
  });
});

function onWorker(ws) {
  worker = ws;
  ws.on('message', (data) => {
    const m = JSON.parse(data.toString());
    if (m.type === 'registertrigger') {
      routes.set(`${m.config.http_method} ${m.config.api_path}`, m.function_id);
      if (routes.size === 4) registered();
    } else if (m.type === 'invokefunction' && m.invocation_id !== undefined) {
      ws.send(JSON.stringify({ type: 'invocationresult', invocation_id: m.invocation_id, function_id: m.function_id }));
    }
  });
}

server.on('request', (req, res) => {
  const url = new URL(req.url, 'http://x');
  const functionId = routes.get(`${req.method} ${url.pathname}`);
  const body = `b${++sequence}`;
  const response = `r${sequence}`;
  // The request body flows into the worker's reading socket as it arrives.
  channels.set(body, (ws, socket) => {
    channels.delete(body);
    req.on('data', (chunk) => {
      ws.send(chunk);
      if (ws.bufferedAmount > 1024 * 1024) {
        req.pause();
        socket.once('drain', () => req.resume());
      }
    });
    req.on('end', () => ws.close(1000, 'stream_complete'));
  });
  // The worker's writing socket: control messages, then the body.
  channels.set(response, (ws) => {
    channels.delete(response);
    let status = 200;
    const headers = {};
    ws.on('message', (data, isBinary) => {
      if (!isBinary) {
        const control = JSON.parse(data.toString());
        if (control.type === 'set_status') status = control.status_code;
        else if (control.type === 'set_headers') Object.assign(headers, control.headers);
        return;
      }
      if (!res.headersSent) res.writeHead(status, headers);
      if (!res.write(data)) {
        ws.pause();
        res.once('drain', () => ws.resume());
      }
    });
    ws.on('close', () => {
      if (!res.headersSent) res.writeHead(status, headers);
      res.end();
    });
  });
  const ref = (id, direction) => ({ channel_id: id, access_key: 'k', direction });
  const data = {
    path: url.pathname,
    method: req.method,
    query_params: Object.fromEntries(url.searchParams),
    path_params: {},
    headers: req.headers,
    body: null,
    request_body: ref(body, 'read'),
    response: ref(response, 'write'),
  };
  worker.send(JSON.stringify({ type: 'invokefunction', invocation_id: String(sequence), function_id: functionId, data }));
});

const script = fileURLToPath(new URL('../workers/stream-worker.mjs', import.meta.url));
spawn(process.execPath, [script], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, OTEL_ENABLED: 'false', III_URL: `ws://127.0.0.1:${server.address().port}` } });
await ready;
console.log(`port=${server.address().port}`);
