/**
 * Streaming over iii channels (docs/streaming.md), with a real iii-sdk 0.22.1 worker using the SDK's
 * own `http()` helper (test/fixtures/workers/stream-worker.mjs), on one process, two processes, and two
 * Redis-mode nodes whose worker's channel sockets land on the other node (through a path-routing
 * proxy, as behind a load balancer). Each case names the iii test it mirrors:
 *   api-triggers.test.ts (sdk/packages/node/iii/tests/, tag iii/v0.22.1): GET, POST body, raw JSON
 *   body through request_body, path and query params, custom status, string body with Content-Type,
 *   file download, file upload, SSE, x-www-form-urlencoded, multipart/form-data;
 *   data-channels.test.ts: sender → processor, coordinator ↔ worker with text messages.
 * And the faults: a worker dying mid-stream, a client dying mid-upload, wrong / missing / reused keys.
 */
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { request } from 'undici';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForEveryProcess } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { PathProxy } from '../support/path-proxy.js';
import { startPathProxy } from '../support/path-proxy.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { startEngine, startWorker, WORKER_READY_MS } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';

interface Topology {
  name: string;
  /** Where HTTP requests are sent (every case runs against each). */
  httpUrls: string[];
  /** What the worker dials (for two nodes: the proxy). */
  workerUrl: string;
  engines: EngineHandle[];
  /** Engine processes behind each URL (routes reach the second over IPC, after the first). */
  processes?: number;
  close(): Promise<void>;
}

const TOPOLOGIES: { name: string; start(): Promise<Topology> }[] = [
  {
    name: 'one process',
    start: async () => {
      const engine = await startEngine();
      return { name: 'one process', httpUrls: [engine.httpUrl], workerUrl: engine.workerUrl, engines: [engine], close: async () => void (await engine.stop()) };
    },
  },
  {
    name: 'two processes',
    start: async () => {
      const engine = await startEngine({ cluster: { processes: 2 } });
      return {
        name: 'two processes',
        httpUrls: [engine.httpUrl],
        workerUrl: engine.workerUrl,
        engines: [engine],
        processes: 2,
        close: async () => void (await engine.stop()),
      };
    },
  },
  {
    name: 'two nodes, channel sockets to the other node',
    start: async () => {
      const redis: RedisServer = await startRedisServer();
      const cluster = { processes: 1, redis_url: redis.url, secret: 'stream-secret', name: `s${Math.random().toString(36).slice(2, 8)}`, advertise_host: '127.0.0.1', heartbeat_ms: 200, lease_ms: 1000 };
      const nodeA = await startEngine({ cluster: { ...cluster, node_id: 'node-a' } });
      const nodeB = await startEngine({ cluster: { ...cluster, node_id: 'node-b' } });
      const proxy: PathProxy = await startPathProxy({ '/ws/channels/': nodeB.ports.workers }, nodeA.ports.workers);
      return {
        name: 'two nodes',
        httpUrls: [nodeA.httpUrl, nodeB.httpUrl],
        workerUrl: proxy.url,
        engines: [nodeA, nodeB],
        close: async () => {
          await proxy.close();
          await nodeB.stop();
          await nodeA.stop();
          await redis.stop();
        },
      };
    },
  },
];

let dir: string;
let file: string;
let fileBytes: Buffer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'switchyard-stream-'));
  file = join(dir, 'download.bin');
  fileBytes = randomBytes(3 * 1024 * 1024 + 123);
  await writeFile(file, fileBytes);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

/** Sums a metric of /metrics over its series whose labels include `labels` (all of them when empty). */
async function metricSum(engine: EngineHandle, name: string, labels = ''): Promise<number> {
  const text = await (await request(`${engine.adminUrl}/metrics`)).body.text();
  let total = 0;
  for (const line of text.split('\n')) if ((line.startsWith(`${name}{`) || line.startsWith(`${name} `)) && line.includes(labels)) total += Number(line.split(' ').pop());
  return total;
}

describe.each(TOPOLOGIES)('streaming over iii channels: $name', (topologyCase) => {
  let topology: Topology;
  let worker: WorkerHandle;

  const startStreamWorker = async (): Promise<void> => {
    worker = startWorker('stream-worker', topology.workerUrl, { STREAM_FILE: file });
    // Every process must hold the routes, not only the one that answered first.
    for (const url of topology.httpUrls) await waitForEveryProcess(`${url}/test/ready`, topology.processes ?? 1, (s) => s === 200, WORKER_READY_MS);
  };

  beforeAll(async () => {
    topology = await topologyCase.start();
    await startStreamWorker();
  });
  afterAll(async () => {
    await worker?.stop();
    await topology?.close();
  });

  const each = async (check: (url: string) => Promise<void>): Promise<void> => {
    for (const url of topology.httpUrls) await check(url);
  };

  it('serves routes registered without a leading slash, with buffered bodies as before (api-triggers: GET, POST, params, query, status, string body)', async () => {
    await each(async (url) => {
      expect((await http(`${url}/test/hello`)).json()).toEqual({ message: 'Hello from GET' });
      const posted = await http(`${url}/test/items`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"test item","value":123}' });
      expect(posted.status).toBe(201);
      expect(posted.json()).toEqual({ received: { name: 'test item', value: 123 }, created: true });
      expect((await http(`${url}/test/items/abc123`)).json()).toEqual({ id: 'abc123' });
      expect((await http(`${url}/test/search?q=hello&limit=10`)).json()).toEqual({ query: 'hello', limit: '10' });
      const missing = await http(`${url}/test/missing`);
      expect([missing.status, missing.json()]).toEqual([404, { error: 'Not found' }]);
      const xml = await http(`${url}/test/xml-return`, { method: 'POST' });
      expect([xml.status, xml.headers['content-type'], xml.text]).toEqual([200, 'text/xml', '<?xml version="1.0" encoding="UTF-8"?><note><to>user</to></note>']);
    });
  });

  it('gives the handler the raw JSON body on request_body beside the parsed body (api-triggers: raw JSON)', async () => {
    await each(async (url) => {
      const res = await http(`${url}/test/json/raw`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"z":2, "a":1}' });
      expect(res.status).toBe(200);
      expect(res.json()).toEqual({ parsed_body: { z: 2, a: 1 }, raw_body: '{"z":2, "a":1}' });
    });
  });

  it('streams a file download to the client byte for byte (api-triggers: PDF download)', async () => {
    await each(async (url) => {
      const res = await request(`${url}/test/download/file`);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('application/octet-stream');
      expect(res.headers['transfer-encoding']).toBe('chunked');
      const body = Buffer.from(await res.body.arrayBuffer());
      expect(body.length).toBe(fileBytes.length);
      expect(sha256(body)).toBe(sha256(fileBytes));
    });
  });

  it('streams an upload to the handler byte for byte, declared or chunked, with body null (api-triggers: PDF upload)', async () => {
    await each(async (url) => {
      const declared = await http(`${url}/test/upload/file`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: fileBytes });
      expect(declared.json()).toEqual({ received_size: fileBytes.length, sha256: sha256(fileBytes), body_was: 'null' });
      const chunked = await request(`${url}/test/upload/file`, {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream' },
        body: Readable.from(
          (function* () {
            for (let offset = 0; offset < fileBytes.length; offset += 100_000) yield fileBytes.subarray(offset, offset + 100_000);
          })(),
        ),
      });
      expect(await chunked.body.json()).toEqual({ received_size: fileBytes.length, sha256: sha256(fileBytes), body_was: 'null' });
      // A small binary body within body_limit is buffered: base64 in `body`, the raw bytes on the channel.
      const small = await http(`${url}/test/upload/file`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: Buffer.from('tiny') });
      expect(small.json()).toEqual({ received_size: 4, sha256: sha256(Buffer.from('tiny')), body_was: 'string' });
    });
  });

  it('streams Server-Sent Events in order (api-triggers: SSE)', async () => {
    await each(async (url) => {
      const res = await request(`${url}/test/sse`);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('text/event-stream');
      const blocks = (await res.body.text()).split('\n\n').filter(Boolean);
      const events = blocks.map((block) => {
        const data: string[] = [];
        let id = '';
        for (const line of block.split('\n')) {
          if (line.startsWith('id: ')) id = line.slice(4);
          else if (line.startsWith('data: ')) data.push(line.slice(6));
        }
        return [id, data.join('\n')];
      });
      expect(events).toEqual([['1', 'Hello, world!'], ['2', '{"count":42}'], ['3', 'line one\nline two'], ['4', 'goodbye']]);
    });
  });

  it('delivers each event as it is written: the first arrives while the handler waits to write the second', async () => {
    await each(async (url) => {
      const res = await request(`${url}/test/sse/gated`);
      const reader = res.body[Symbol.asyncIterator]();
      let seen = '';
      while (!seen.includes('data: first\n\n')) seen += String((await reader.next()).value);
      expect(seen).not.toContain('second');
      expect((await http(`${url}/test/sse/release`, { method: 'POST' })).json()).toEqual({ released: true });
      for (let step = await reader.next(); step.done !== true; step = await reader.next()) seen += String(step.value);
      expect(seen).toBe('data: first\n\ndata: second\n\n');
    });
  });

  it('hands forms to the handler raw on request_body and parsed in body (api-triggers: urlencoded, multipart)', async () => {
    await each(async (url) => {
      const form = new URLSearchParams({ name: 'John Doe', email: 'john@example.com', age: '30' });
      const res = await http(`${url}/test/form/urlencoded`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form.toString() });
      expect(res.json()).toEqual({ name: 'John Doe', email: 'john@example.com', age: '30', parsed: { name: 'John Doe', email: 'john@example.com', age: '30' } });
      const multipart = new FormData();
      multipart.append('title', 'Test Document');
      multipart.append('file', new Blob([fileBytes]), 'upload.bin');
      const sent = await fetch(`${url}/test/form/multipart`, { method: 'POST', body: multipart });
      const data = (await sent.json()) as { body_size: number };
      expect(data).toMatchObject({ has_boundary: true, has_title: true, has_filename: true });
      expect(data.body_size).toBeGreaterThan(fileBytes.length);
    });
  });

  it('answers with the status and headers a handler set when it closes its response without a body', async () => {
    await each(async (url) => {
      const res = await http(`${url}/test/status-only`, { method: 'DELETE' });
      expect([res.status, res.headers['x-only'], res.text]).toEqual([202, 'headers', '']);
    });
  });

  it('streams between two functions over engine::channels::create (data-channels: sender → processor, coordinator ↔ worker)', async () => {
    await each(async (url) => {
      const records = [{ value: 72 }, { value: 2048 }, { value: 340 }, { value: 95 }, { value: 12 }];
      const sent = await http(`${url}/test/data/sender`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ records }) });
      expect(sent.json()).toEqual({ label: 'metrics-batch', count: 5, sum: 2567, max: 2048 });
      const text = 'The quick brown fox jumps over the lazy dog and then runs around the park';
      const coordinated = await http(`${url}/test/data/coordinator`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text }) });
      const result = coordinated.json<{ messages: { type: string; word_count?: number }[]; binary: unknown; result: unknown }>();
      expect(result.binary).toEqual({ words: ['The', 'quick', 'brown', 'fox', 'jumps'], total: 15 });
      expect(result.result).toEqual({ status: 'done' });
      expect(result.messages.filter((m) => m.type === 'progress').length).toBeGreaterThan(0);
      expect(result.messages.find((m) => m.type === 'complete')).toEqual({ type: 'complete', word_count: 15 });
    });
  });

  it('refuses a wrong or missing key (404), a malformed target (400) and an end already taken (409)', async () => {
    const raw = await RawWorker.connect(topology.workerUrl);
    try {
      raw.send({ type: 'invokefunction', invocation_id: 'c-1', function_id: 'engine::channels::create', data: { buffer_size: 4 } });
      const created = await raw.next((f) => f.type === 'invocationresult' && f.invocation_id === 'c-1');
      const { reader } = created.result as { reader: { channel_id: string; access_key: string } };
      const status = (query: string): Promise<number | 'open'> => {
        const ws = new WebSocket(`${topology.workerUrl}/ws/channels/${reader.channel_id}${query}`);
        return new Promise((resolve) => {
          ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
          ws.once('open', () => resolve('open'));
          ws.once('error', () => undefined);
        });
      };
      expect(await status('?key=wrong&dir=read')).toBe(404);
      expect(await status('?dir=read')).toBe(400);
      expect(await status(`?key=${reader.access_key}&dir=sideways`)).toBe(400);
      expect(await status(`?key=${reader.access_key}&dir=read`)).toBe('open');
      expect(await status(`?key=${reader.access_key}&dir=read`)).toBe(409);
    } finally {
      await raw.close();
    }
  });

  it("closes the worker's response channel when the client goes away mid-stream", async () => {
    const url = topology.httpUrls[0] as string;
    const controller = new AbortController();
    const res = await request(`${url}/test/stream/endless`, { signal: controller.signal });
    const reader = res.body[Symbol.asyncIterator]();
    await reader.next();
    controller.abort();
    res.body.on('error', () => undefined);
    const last = async (): Promise<{ state: string; how?: string }> => (await http(`${url}/test/stream/last`)).json();
    await waitUntil(async () => (await last()).state === 'ended', 10_000, "the worker's stream to close");
    // The engine closes the channel (1001); the SDK's writer reconnects when a write lands while that
    // close is in flight, and the closed channel refuses it (404): its stream ends either way.
    expect((await last()).how).toMatch(/^close$|^error: Unexpected server response: 404$/);
  });

  it("fails the worker's reader when the client dies mid-upload", async () => {
    const url = topology.httpUrls[0] as string;
    const { port } = new URL(url);
    const socket = connect(Number(port), '127.0.0.1');
    await once(socket, 'connect');
    socket.write(`POST /test/upload/watch HTTP/1.1\r\nHost: x\r\ncontent-type: application/octet-stream\r\ncontent-length: ${10 * 1024 * 1024}\r\n\r\n`);
    socket.write(Buffer.alloc(1024 * 1024, 1));
    // Once the handler has read some of it, the client vanishes.
    const last = async (): Promise<{ state: string; bytes?: number; message?: string }> => (await http(`${url}/test/upload/last`)).json();
    await waitUntil(async () => ((await last()).bytes ?? 0) > 0, 10_000, 'the handler reading the upload');
    socket.destroy();
    await waitUntil(async () => (await last()).state !== 'reading', 10_000, 'the handler seeing the upload end');
    expect((await last()).state).toBe('error');
  });

  it('raises the serving process\'s heap growing factor while an upload or a download moves fast, and sets it back once it stalls', async () => {
    const url = topology.httpUrls[0] as string;
    // Every process of every engine: the gauge is 1 on the process serving the request, 0 elsewhere.
    const raised = async (): Promise<number> => {
      let total = 0;
      for (const engine of topology.engines) total += await metricSum(engine, 'switchyard_streams_heap_raised');
      return total;
    };
    expect(await raised()).toBe(0);
    // An upload that sends 2 MiB of its 10 MiB at once, then nothing: raised, then let go within a
    // window or two (1-2 s) while its connection is still open.
    const { port } = new URL(url);
    const socket = connect(Number(port), '127.0.0.1');
    await once(socket, 'connect');
    socket.write(`POST /test/upload/watch HTTP/1.1\r\nHost: x\r\ncontent-type: application/octet-stream\r\ncontent-length: ${10 * 1024 * 1024}\r\n\r\n`);
    socket.write(Buffer.alloc(2 * 1024 * 1024, 1));
    await waitUntil(async () => (await raised()) === 1, 10_000, 'the upload to hold the raised factor');
    await waitUntil(async () => (await raised()) === 0, 10_000, 'the stalled upload to let it go');
    expect(socket.destroyed).toBe(false);
    socket.destroy();
    // A download of 16 MiB whose client reads its first piece and then nothing: the engine writes
    // more than 1 MiB into its response before the client's back-pressure stops the worker.
    const controller = new AbortController();
    const res = await request(`${url}/test/download/generated?bytes=${16 * 1024 * 1024}`, { signal: controller.signal });
    res.body.on('error', () => undefined);
    await res.body[Symbol.asyncIterator]().next();
    await waitUntil(async () => (await raised()) === 1, 10_000, 'the download to hold the raised factor');
    await waitUntil(async () => (await raised()) === 0, 10_000, 'the stalled download to let it go');
    controller.abort();
  });

  it('truncates the response at once when the worker dies mid-stream, then serves again once it is back', async () => {
    const url = topology.httpUrls[0] as string;
    const res = await request(`${url}/test/die-mid-stream`, { bodyTimeout: 15_000 });
    expect(res.statusCode).toBe(200);
    const started = Date.now();
    await expect(res.body.arrayBuffer()).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(10_000);
    await worker.exited;
    await startStreamWorker();
    expect((await http(`${url}/test/hello`)).status).toBe(200);
    if (topology.engines.length > 1 || topology.name === 'two processes') {
      // Across processes or nodes, channel sockets were joined to the process holding their channel.
      let opened = 0;
      for (const engine of topology.engines) opened += await metricSum(engine, 'switchyard_channel_links_total', 'result="opened"');
      expect(opened).toBeGreaterThan(0);
    }
    let cut = 0;
    for (const engine of topology.engines) cut += await metricSum(engine, 'switchyard_http_streams_total', 'outcome="cut"');
    expect(cut).toBeGreaterThan(0);
  });
});
