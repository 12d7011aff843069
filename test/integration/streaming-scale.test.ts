/**
 * docs/streaming.md#memory and #faults, on a two-process engine: a 1 GiB upload and a 1 GiB download
 * keep every child under 150 MB of RSS (the engine holds a few chunks per stream, never the body); so
 * does a client that stops reading while its worker would write 512 MiB; and a child that dies leaves
 * no channel open anywhere else. RSS is read from /proc while the bytes flow.
 */
import { Readable } from 'node:stream';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitForEveryProcess } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { startEngine, startWorker, WORKER_READY_MS } from '../support/processes.js';
import { sampleRss } from '../support/proc.js';

const GIB = 1024 * 1024 * 1024;
const CHUNK = Buffer.alloc(256 * 1024, 0x5a);
const RSS_LIMIT_MB = 150;

describe('streaming 1 GiB each way through two processes', () => {
  let engine: EngineHandle;
  let worker: WorkerHandle;
  let children: number[];

  beforeAll(async () => {
    // The default heartbeat: on a CPU-starved machine iii-sdk's channel writer can keep the worker's
    // event loop from answering pings for seconds while it writes, and its channel traffic is what
    // keeps it (docs/reliability.md#frozen-or-half-open-worker-heartbeat).
    engine = await startEngine({ cluster: { processes: 2 } });
    worker = startWorker('stream-worker', engine.workerUrl, { STREAM_FILE: '/dev/null' });
    // Both children must hold the routes: each request may land on either.
    await waitForEveryProcess(`${engine.httpUrl}/test/ready`, 2, (s) => s === 200, WORKER_READY_MS);
    const ready = (await (await request(`${engine.adminUrl}/readyz`)).body.json()) as { children: { pid: number }[] };
    children = ready.children.map((child) => child.pid);
    expect(children).toHaveLength(2);
  });
  afterAll(async () => {
    await worker?.stop();
    await engine?.stop();
  });

  it(`keeps every child under ${RSS_LIMIT_MB} MB while a 1 GiB upload streams to the handler`, async () => {
    const sampler = sampleRss(children);
    const body = Readable.from(
      (function* () {
        for (let sent = 0; sent < GIB; sent += CHUNK.length) yield CHUNK;
      })(),
    );
    const res = await request(`${engine.httpUrl}/test/upload/file`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body,
      headersTimeout: 120_000,
      bodyTimeout: 120_000,
    });
    const answer = (await res.body.json()) as { received_size: number };
    const peaks = sampler.stop();
    expect(answer.received_size).toBe(GIB);
    for (const [pid, peak] of peaks) expect(peak, `child ${pid} peak RSS`).toBeLessThan(RSS_LIMIT_MB);
  }, 180_000);

  it(`keeps every child under ${RSS_LIMIT_MB} MB while a 1 GiB download streams to the client`, async () => {
    const sampler = sampleRss(children);
    const res = await request(`${engine.httpUrl}/test/download/generated?bytes=${GIB}`, { headersTimeout: 120_000, bodyTimeout: 120_000 });
    let received = 0;
    for await (const chunk of res.body) received += (chunk as Buffer).length;
    const peaks = sampler.stop();
    expect(received).toBe(GIB);
    for (const [pid, peak] of peaks) expect(peak, `child ${pid} peak RSS`).toBeLessThan(RSS_LIMIT_MB);
  }, 180_000);

  it('holds a writer back while its client does not read: memory stays bounded, nothing is lost', async () => {
    const total = 512 * 1024 * 1024;
    const sampler = sampleRss(children);
    const res = await request(`${engine.httpUrl}/test/download/generated?bytes=${total}`, { headersTimeout: 60_000, bodyTimeout: 60_000 });
    const reader = res.body[Symbol.asyncIterator]();
    let received = ((await reader.next()).value as Buffer).length;
    // The client reads nothing for a while: back-pressure must stop the worker, not buffer its writes.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const whilePaused = Math.max(...sampler.stop().values());
    for (let step = await reader.next(); step.done !== true; step = await reader.next()) received += (step.value as Buffer).length;
    expect(received).toBe(total);
    expect(whilePaused).toBeLessThan(RSS_LIMIT_MB);
  }, 120_000);

  it('leaves no channel open on the other child when a child dies mid-stream', async () => {
    const open = async (): Promise<number> => {
      const text = await (await request(`${engine.adminUrl}/metrics`)).body.text();
      return text
        .split('\n')
        .filter((line) => line.startsWith('switchyard_channels_open'))
        .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
    };
    // Streams on fresh connections land on both children; each holds its channels, and a worker's
    // channel socket on the other child is linked to it.
    const streams = await Promise.all(Array.from({ length: 6 }, () => request(`${engine.httpUrl}/test/stream/endless`, { headers: { connection: 'close' } })));
    for (const res of streams) res.body.on('error', () => undefined);
    await waitUntil(async () => (await open()) >= 6, 10_000, 'the streams to be open');
    process.kill(children[0] as number, 'SIGKILL');
    // The streams served by the dead child are cut; the others go on until their clients leave.
    for (const res of streams) res.body.destroy();
    await waitUntil(async () => (await open()) === 0, 15_000, 'no channel left open');
    const ready = (await (await request(`${engine.adminUrl}/readyz`)).body.json()) as { children: { pid: number }[] };
    children = ready.children.map((child) => child.pid);
  }, 60_000);
});
