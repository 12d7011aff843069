// What the baselines share: the link to a worker process over one ws socket, the HTTP handler that
// turns a request into one invokefunction frame, and the relay stream between two processes.
// Deliberately minimal: no validation, no timeouts, no logging. No Switchyard code.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer as createNetServer } from 'node:net';
import { setImmediate } from 'node:timers';
import { URL, fileURLToPath } from 'node:url';
import { WebSocketServer } from 'ws';

const WORKER_SCRIPTS = { raw: '../workers/raw-worker.mjs', sdk: '../workers/sdk-worker.mjs' };
const ROUTES = 'GET /bench/hello,POST /bench/echo';
const fnOf = (method) => (method === 'POST' ? 'bench::f1' : 'bench::f0');
/**
 * MIDDLEWARE=1: the worker also serves three middleware (bench/workers/raw-worker.mjs), and every
 * request makes the round trips three middleware need: onRequest, preHandler, the handler,
 * postHandler, one after the other — the least any engine must do for them.
 */
const MIDDLEWARE = process.env.MIDDLEWARE === '1';
/**
 * WORKER_OTEL=true: the worker runs with its OpenTelemetry on (iii-sdk as shipped), and every
 * invocation carries an unsampled traceparent, as an engine without a collector sends (a new trace id
 * per request; flags 00, so the SDK records nothing). Default: OpenTelemetry off, no trace context.
 */
const WORKER_OTEL = process.env.WORKER_OTEL === 'true';
/**
 * TRACEPARENT=1: every invocation carries the unsampled traceparent even with the worker's
 * OpenTelemetry off, as an engine sends it whatever the worker does with it (the SDK echoes it in its
 * result).
 */
const SEND_TRACEPARENT = WORKER_OTEL || process.env.TRACEPARENT === '1';
let traceSeq = 0;
const traceparent = () => {
  const id = (++traceSeq).toString(16).padStart(16, '0');
  return `,"traceparent":"00-${id}${id}-${id}-00"`;
};

/**
 * Listens for one worker on a port of this process alone (exclusive: inside a node:cluster child a
 * shared port would deal the worker to any sibling), spawns it (WORKER=raw|sdk), and resolves with
 * `invoke(functionId, dataJson, done)` once the worker answers. `done(message, text)` gets the worker's
 * invocationresult parsed and as received.
 */
export async function startWorker() {
  const server = createHttpServer();
  await new Promise((resolve) => server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, resolve));
  const wss = new WebSocketServer({ server });
  const script = fileURLToPath(new URL(WORKER_SCRIPTS[process.env.WORKER ?? 'raw'], import.meta.url));
  const url = `ws://127.0.0.1:${server.address().port}`;
  spawn(process.execPath, [script], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, III_URL: url, ROUTES, OTEL_ENABLED: WORKER_OTEL ? 'true' : 'false' } });
  // The worker's own socket connects to `/`; with OpenTelemetry on, iii-sdk also opens `/otel` for its
  // telemetry, which the baseline accepts and drops (an engine without a collector does the same).
  const ws = await new Promise((resolve) =>
    wss.on('connection', (socket, req) => {
      if (req.url?.startsWith('/otel')) socket.on('message', () => undefined);
      else resolve(socket);
    }),
  );
  const pending = new Map();
  let lastId = 0;
  let triggers = 0;
  let registered;
  const allRegistered = new Promise((resolve) => (registered = resolve));
  ws.on('message', (data) => {
    const text = data.toString();
    const m = JSON.parse(text);
    if (m.type === 'invocationresult') {
      const done = pending.get(m.invocation_id);
      pending.delete(m.invocation_id);
      done?.(m, text);
    } else if (m.type === 'ping') {
      ws.send('{"type":"pong"}');
    } else if (m.type === 'registertrigger' && ++triggers === (MIDDLEWARE ? 5 : 2)) {
      registered();
    }
  });
  const invoke = (functionId, dataJson, done) => {
    const id = String(++lastId);
    pending.set(id, done);
    ws.send(`{"type":"invokefunction","invocation_id":"${id}","function_id":"${functionId}"${SEND_TRACEPARENT ? traceparent() : ''},"data":${dataJson}}`);
  };
  await allRegistered;
  await new Promise((resolve) => invoke('bench::f0', '{}', resolve));
  return invoke;
}

/** The HTTP side: the request (JSON body parsed) as one invocation; the worker's ApiResponse as the reply. */
export function handler(invoke) {
  return (req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      const text = chunks.length === 0 ? '' : Buffer.concat(chunks).toString();
      const request = { path: req.url, method: req.method, headers: req.headers, query_params: {}, body: text === '' ? null : JSON.parse(text) };
      // The handler's channel refs, as iii sends them with every HTTP invocation: an iii-sdk worker
      // builds a reader and a writer for them (connected only if used), so the baseline's worker does
      // the same work per request as an engine's. FRAME= sends another request object (frameRequest).
      const handlerRequest = FRAME === undefined ? { ...request, request_body: channelRef('read'), response: channelRef('write') } : frameRequest(req, request.body);
      const reply = (result) => {
        const { status_code: status, headers, body } = result;
        const json = JSON.stringify(body);
        res.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(json) });
        res.end(json);
      };
      if (!MIDDLEWARE) {
        invoke(fnOf(req.method), JSON.stringify(handlerRequest), (m) => reply(m.result));
        return;
      }
      const middleware = (i, extra, next) =>
        invoke(`bench::mw${i}`, `{"phase":"${PHASES[i]}","request":${JSON.stringify(request)},"context":{}${extra}}`, (m) => {
          if (m.result?.action === 'continue') next();
          else reply({ status_code: 500, headers: {}, body: null });
        });
      middleware(0, '', () =>
        middleware(1, '', () =>
          invoke(fnOf(req.method), JSON.stringify(handlerRequest), (m) => middleware(2, `,"response":${JSON.stringify(m.result)}`, () => reply(m.result))),
        ),
      );
    });
  };
}
const PHASES = ['onRequest', 'preHandler', 'postHandler'];

/**
 * FRAME=engine|spec|norefs: the handler's request object in another shape, to price what each part of
 * an engine's frame costs an iii-sdk worker (bench/scenarios/worker-frame.ts). `engine`: every member
 * Switchyard sends (docs/http.md: the ApiRequest, its `request_id` and `ip` extensions, the request id
 * header, the two channel refs); `spec`: the ApiRequest's own members and the refs, no extensions;
 * `norefs`: `engine` without the channel refs.
 */
const FRAME = process.env.FRAME;
const frameRequest = (req, body) => {
  const id = randomUUID();
  const spec = {
    path: req.url,
    method: req.method,
    path_params: {},
    query_params: {},
    body,
    headers: FRAME === 'spec' ? req.headers : { ...req.headers, 'x-request-id': id },
    trigger: { type: 'http', path: req.url, method: req.method },
    context: {},
  };
  const request = FRAME === 'spec' ? spec : { ...spec, request_id: id, ip: req.socket.remoteAddress };
  if (FRAME === 'norefs') return request;
  // As the engine makes them: one access key per request, shared by both refs.
  const key = randomUUID();
  return { ...request, request_body: channelRef('read', key), response: channelRef('write', key) };
};
let channelSeq = 0;
const channelRef = (direction, key = 'baseline-key') => ({ channel_id: `baseline-${++channelSeq}`, access_key: key, direction });

/**
 * A frame stream on a socket: `u32 length | u32 id | UTF-8 text`, any number in flight, matched by
 * id. Writes of one loop turn go out as one write (at most 16 KiB waits for the end of the turn).
 * Returns `send(id, text)`; `onFrame(id, text)` gets every frame received.
 */
export function frameStream(socket, onFrame) {
  let queue = [];
  let queued = 0;
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (queue.length === 0) return;
    socket.write(queue.length === 1 ? queue[0] : Buffer.concat(queue, queued));
    queue = [];
    queued = 0;
  };
  let rest = null;
  socket.on('data', (chunk) => {
    const buf = rest === null ? chunk : Buffer.concat([rest, chunk]);
    let offset = 0;
    while (buf.length - offset >= 8) {
      const length = buf.readUInt32BE(offset);
      if (buf.length - offset - 4 < length) break;
      onFrame(buf.readUInt32BE(offset + 4), buf.toString('utf8', offset + 8, offset + 4 + length));
      offset += 4 + length;
    }
    rest = offset < buf.length ? buf.subarray(offset) : null;
  });
  socket.setNoDelay?.(true);
  return (id, text) => {
    const bytes = Buffer.byteLength(text);
    const frame = Buffer.allocUnsafe(8 + bytes);
    frame.writeUInt32BE(4 + bytes, 0);
    frame.writeUInt32BE(id, 4);
    frame.write(text, 8);
    queue.push(frame);
    queued += frame.length;
    if (queued >= 16 * 1024) flush();
    else if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
}

/**
 * The owner's end of the relay: each frame is `functionId \n dataJson`; the reply is the worker's
 * message text. `where` is a Unix socket path, or `{ host, port }` for TCP (port 0: any free one).
 * Resolves to the address to give relayClient.
 */
export async function relayServer(where, invoke) {
  const server = createNetServer((socket) => {
    const send = frameStream(socket, (id, text) => {
      const nl = text.indexOf('\n');
      invoke(text.slice(0, nl), text.slice(nl + 1), (_m, reply) => send(id, reply));
    });
  });
  await new Promise((resolve) => server.listen(where, resolve));
  return typeof where === 'string' ? where : { host: where.host, port: server.address().port };
}

/** The receiving end: an `invoke` with the local one's signature that goes through the relay (at relayServer's address). */
export async function relayClient(where) {
  const socket = connect(where);
  await new Promise((resolve) => socket.once('connect', resolve));
  const pending = new Map();
  let lastId = 0;
  const send = frameStream(socket, (id, text) => {
    const done = pending.get(id);
    pending.delete(id);
    done(JSON.parse(text), text);
  });
  return (functionId, dataJson, done) => {
    lastId = lastId >= 0xffffffff ? 1 : lastId + 1;
    pending.set(lastId, done);
    send(lastId, `${functionId}\n${dataJson}`);
  };
}

export function listenHttp(invoke) {
  const server = createHttpServer(handler(invoke));
  return new Promise((resolve) => server.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) }, () => resolve(server.address().port)));
}
