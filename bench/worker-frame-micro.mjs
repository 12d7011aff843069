// What an engine's frame costs the iii-sdk worker per invocation, in one process, no sockets
// (docs/performance.md, issue 26 point 3): for each shape of the handler's request object, the
// worker's per-invocation work that depends on it — parse the frame, turn channel refs into reader
// and writer objects (the SDK's ChannelReader / ChannelWriter, public exports), and redact and
// serialise the input for the invocation's span event (the SDK does this on every call unless
// III_DISABLE_TRACE_PAYLOADS is set, sampled or not). CPU µs per invocation, median of 5 rounds.
// The walk that turns refs into objects is our own few lines doing what the SDK's does (a deep copy
// replacing each ref); the objects and the redaction are the SDK's.
//   node bench/worker-frame-micro.mjs
import { randomUUID } from 'node:crypto';
import { ChannelReader, ChannelWriter } from 'iii-sdk/channel';
import { redactAndTruncate } from '@iii-dev/helpers/observability';

const isRef = (v) => typeof v?.channel_id === 'string' && typeof v.access_key === 'string' && (v.direction === 'read' || v.direction === 'write');
const resolve = (v) => {
  if (isRef(v)) return v.direction === 'read' ? new ChannelReader('ws://127.0.0.1:1', v) : new ChannelWriter('ws://127.0.0.1:1', v);
  if (Array.isArray(v)) return v.map(resolve);
  if (v === null || typeof v !== 'object') return v;
  const out = {};
  for (const [k, x] of Object.entries(v)) out[k] = resolve(x);
  return out;
};

// The request object as Switchyard sends it for GET /bench/hello (captured from the engine).
const id = randomUUID();
const key = randomUUID();
const apiRequest = {
  path: '/bench/hello',
  method: 'GET',
  path_params: {},
  query_params: {},
  body: null,
  headers: { host: '127.0.0.1:40000', connection: 'keep-alive', 'x-request-id': id },
  trigger: { type: 'http', path: '/bench/hello', method: 'GET' },
  context: {},
};
const refs = {
  request_body: { channel_id: '103f9bed8d4f-1', access_key: key, direction: 'read' },
  response: { channel_id: '103f9bed8d4f-2', access_key: key, direction: 'write' },
};
const shapes = {
  "Switchyard's frame": { ...apiRequest, request_id: id, ip: '127.0.0.1', ...refs },
  'without the channel refs': { ...apiRequest, request_id: id, ip: '127.0.0.1' },
  'ApiRequest + refs, no extensions': { ...apiRequest, headers: { host: '127.0.0.1:40000', connection: 'keep-alive' }, ...refs },
  'empty object': {},
};
const frame = (data) => JSON.stringify({ type: 'invokefunction', invocation_id: randomUUID(), function_id: 'bench::f0', traceparent: `00-${'1'.repeat(32)}-${'2'.repeat(16)}-00`, data });
const N = 20_000;
const cpuUs = (fn) => {
  const start = process.cpuUsage();
  for (let i = 0; i < N; i++) fn();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / N;
};
const results = new Map(Object.keys(shapes).map((k) => [k, { objects: [], all: [] }]));
for (let round = 0; round < 5; round++) {
  for (const [name, data] of Object.entries(shapes)) {
    const text = frame(data);
    const r = results.get(name);
    r.objects.push(cpuUs(() => resolve(JSON.parse(text).data)));
    r.all.push(cpuUs(() => redactAndTruncate(resolve(JSON.parse(text).data), null)));
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log('| request object | frame chars | parse + objects µs | + redact and serialise µs | serialised chars |');
console.log('| --- | ---: | ---: | ---: | ---: |');
for (const [name, data] of Object.entries(shapes)) {
  const r = results.get(name);
  const json = redactAndTruncate(resolve(data), null).json;
  console.log(`| ${name} | ${frame(data).length} | ${median(r.objects).toFixed(2)} | ${median(r.all).toFixed(2)} | ${json.length} |`);
}
