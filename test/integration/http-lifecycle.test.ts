import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorEnvelope } from '../support/assertions.js';
import type { SimpleResponse } from '../support/http.js';
import { http, waitForStatus } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { QUICK_GRACE_MS, startEngine, startWorker, WORKER_READY_MS } from '../support/processes.js';
import { RawConnection } from '../support/raw-http.js';
import { RawWorker } from '../support/raw-worker.js';

// Workers and the engine coming and going (http-module.md §1, §4 rules 1 and 5, worker connection
// rules 1-4; architecture.md WORKER_DISCONNECTED and SHUTTING_DOWN rows), admin probes, SIGTERM.
const TIMEOUT_MS = 20_000;

describe('workers and routes at runtime', () => {
  let engine: EngineHandle;
  const workers: WorkerHandle[] = [];
  const worker = (name: string, env: NodeJS.ProcessEnv = {}): WorkerHandle => {
    const w = startWorker(name, engine.workerUrl, env);
    workers.push(w);
    return w;
  };

  beforeAll(async () => {
    engine = await startEngine({ api: { default_timeout: TIMEOUT_MS }, workers: { reconnect_grace_ms: QUICK_GRACE_MS } });
    worker('http-worker');
    worker('satellite-worker', { NAME: 'sat' });
    await waitForStatus(`${engine.httpUrl}/ready`, (s) => s === 200, {}, WORKER_READY_MS);
    await waitForStatus(`${engine.httpUrl}/sat/hello`, (s) => s === 200, {}, WORKER_READY_MS);
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await engine?.stop();
  });

  it('answers /healthz and /readyz with 200 on the admin port', async () => {
    const health = await http(`${engine.adminUrl}/healthz`);
    expect(health.status).toBe(200);
    expect(health.json()).toEqual({ status: 'ok', ready: true, mode: 'embedded', bus: 'in_sync', children: { ready: 1, total: 1 } });
    // The primary aggregates child status reported every 250 ms: wait for it with a deadline.
    let ready: SimpleResponse | undefined;
    await waitUntil(async () => (ready = await http(`${engine.adminUrl}/readyz`)).json().connectedWorkers === 2, 5000, 'readyz to count both workers');
    expect(ready!.status).toBe(200);
    expect(ready!.json()).toMatchObject({ status: 'ready', connectedWorkers: 2 });
  });

  it('lets a worker call a function of another worker through the engine', async () => {
    const res = await http(`${engine.httpUrl}/call-peer?name=ada`);
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ ok: true, result: { greeting: 'hello ada', from: 'sat' } });
  });

  it('gives the calling worker an error code for a function nobody serves', async () => {
    const missing = await http(`${engine.httpUrl}/call-missing`);
    expect(missing.status).toBe(200);
    expect(missing.json()).toMatchObject({ code: 'function_not_found' });
    expect(typeof missing.json().message).toBe('string');
    const peer = await http(`${engine.httpUrl}/call-peer?fn=nobody::greet`);
    expect(peer.json()).toMatchObject({ ok: false, code: 'function_not_found' });
  });

  it('passes a called function\'s own error code back to the calling worker', async () => {
    const res = await http(`${engine.httpUrl}/call-peer?fn=api::throws`);
    expect(res.json()).toMatchObject({ ok: false, code: 'invocation_failed' });
    expect(res.json().message).toContain('boom from handler');
  });

  it('adds routes when a worker registers them and removes them when it disconnects', async () => {
    expectErrorEnvelope(await http(`${engine.httpUrl}/late/hello`), 404, 'NOT_FOUND');
    const late = worker('satellite-worker', { NAME: 'late' });
    const res = await waitForStatus(`${engine.httpUrl}/late/hello`, (s) => s === 200, {}, WORKER_READY_MS);
    expect(res.json()).toEqual({ from: 'late', path: '/late/hello' });
    expect((await http(`${engine.httpUrl}/call-peer?fn=late::greet&name=bo`)).json()).toEqual({
      ok: true,
      result: { greeting: 'hello bo', from: 'late' },
    });

    expect(await late.stop()).toEqual({ code: 0, signal: null });
    const gone = await waitForStatus(`${engine.httpUrl}/late/hello`, (s) => s === 404);
    expectErrorEnvelope(gone, 404, 'NOT_FOUND');
    // Its functions are gone too, and the other workers' routes are untouched.
    expect((await http(`${engine.httpUrl}/call-peer?fn=late::greet`)).json()).toMatchObject({ ok: false, code: 'function_not_found' });
    expect((await http(`${engine.httpUrl}/sat/hello`)).status).toBe(200);
    expect((await http(`${engine.httpUrl}/echo/1`)).status).toBe(200);
  });

  it('answers 502 WORKER_DISCONNECTED at once when the worker exits mid-request, then drops its routes', async () => {
    const doomed = worker('satellite-worker', { NAME: 'doomed' });
    await waitForStatus(`${engine.httpUrl}/doomed/hello`, (s) => s === 200, {}, WORKER_READY_MS);
    const started = performance.now();
    const res = await http(`${engine.httpUrl}/doomed/exit`, { headers: { 'x-request-id': 'doomed-1' } });
    const elapsed = performance.now() - started;
    const body = expectErrorEnvelope(res, 502, 'WORKER_DISCONNECTED');
    expect(body.request_id).toBe('doomed-1');
    expect(elapsed).toBeLessThan(2000); // default_timeout is 20 s: the engine did not wait for it
    expect(await doomed.exited).toEqual({ code: 3, signal: null });
    const gone = await waitForStatus(`${engine.httpUrl}/doomed/hello`, (s) => s === 404);
    expectErrorEnvelope(gone, 404, 'NOT_FOUND');
    expect((await http(`${engine.httpUrl}/sat/hello`)).status).toBe(200);
  });

  // Last: the engine is gone afterwards.
  it('on SIGTERM finishes admitted requests, answers new ones 503 SHUTTING_DOWN, and exits 0', async () => {
    const connection = new RawConnection(engine.httpUrl);
    await connection.write('GET /slow?ms=1500 HTTP/1.1\r\nHost: x\r\nX-Request-Id: drain-1\r\n\r\n');
    const slowWorker = workers[0]!;
    await slowWorker.stdout.waitFor((line) => line === 'slow-start drain-1', 5000, 'slow request in the handler');
    const raw = await RawWorker.connect(engine.workerUrl);
    await raw.ofType('workerregistered');
    engine.child.kill('SIGTERM');
    await engine.stdout.waitFor((line) => line.includes('"draining"'), 5000, 'engine draining');
    // Readiness turns 503 at once, while the slow request is still being served.
    expect((await http(`${engine.adminUrl}/readyz`)).status).toBe(503);
    // Same connection, so it reaches the draining engine (new connections are no longer accepted).
    await connection.write('GET /echo/1 HTTP/1.1\r\nHost: x\r\nX-Request-Id: drain-2\r\n\r\n');

    const [first, second, ...rest] = await connection.closed;
    expect(rest).toEqual([]);
    expect(first!.status).toBe(200);
    expect(JSON.parse(first!.text)).toEqual({ slept: 1500 });
    const body = expectErrorEnvelope(second!, 503, 'SHUTTING_DOWN');
    expect(body.request_id).toBe('drain-2');
    expect(second!.headers.connection).toBe('close');
    // Workers are told "going away" so the SDK reconnects to another engine.
    expect((await raw.closed).code).toBe(1001);
    expect(await engine.exited).toEqual({ code: 0, signal: null });
  });
});

describe('module config: host and port', () => {
  const HOST = '127.0.0.2'; // another loopback address (Linux routes all of 127/8 to lo)
  let engine: EngineHandle;
  let holder: Server;
  let port: number;

  beforeAll(async () => {
    // Holding 127.0.0.1:<port> keeps the port ours, and an engine bound to 0.0.0.0 could not start.
    holder = createServer((_req, res) => res.end('holder'));
    await new Promise<void>((resolve, reject) => {
      holder.once('error', reject);
      holder.listen(0, '127.0.0.1', resolve);
    });
    port = (holder.address() as AddressInfo).port;
    engine = await startEngine({ api: { host: HOST, port } });
  });
  afterAll(async () => {
    await engine?.stop();
    await new Promise((resolve) => holder?.close(resolve));
  });

  it('listens on the configured port, on the configured host only', async () => {
    expect(engine.ports.http).toBe(port);
    expectErrorEnvelope(await http(`http://${HOST}:${port}/anything`), 404, 'NOT_FOUND');
    expect((await http(`http://127.0.0.1:${port}/anything`)).text).toBe('holder');
  });

  it('exits 0 on SIGTERM', async () => {
    expect(await engine.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(engine.stdout.lines.some((line) => line.includes('"stopped"'))).toBe(true);
  });
});
