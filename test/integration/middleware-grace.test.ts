import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorEnvelope } from '../support/assertions.js';
import { http, waitForStatus } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine, stopAll } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';

/**
 * The reconnect grace covers a departed worker's middleware like its handlers (docs/reliability.md):
 * a request that meets the worker's own scoped middleware while the worker is away waits for it,
 * instead of failing at once with 500 MIDDLEWARE_FAILED (found by the memory soak, docs/soak.md).
 */
const GRACE_MS = 3000;

/** A raw worker with an onRequest middleware scoped to /mwg and a route under it, answering `by`. */
async function connectWorker(workerUrl: string, by: string): Promise<RawWorker> {
  const raw = await RawWorker.connect(workerUrl);
  raw.send({ type: 'registerfunction', id: 'mwg::mw' });
  raw.send({ type: 'registertrigger', id: 'mwg-mw', trigger_type: 'http_middleware', function_id: 'mwg::mw', config: { phase: 'onRequest', scope: { path: '/mwg' } } });
  raw.serve('mwg::mw', () => ({ action: 'continue', context: { mw: by } }));
  raw.route('mwg::item', 'GET', '/mwg/item');
  raw.serve('mwg::item', (req) => ({ status_code: 200, body: { by, mw: req.context?.mw ?? null } }));
  await raw.sync();
  return raw;
}

describe('reconnect grace for middleware', () => {
  let engine: EngineHandle;
  let worker: RawWorker | undefined;

  beforeAll(async () => {
    engine = await startEngine({ workers: { reconnect_grace_ms: GRACE_MS } });
  });
  afterAll(async () => {
    await worker?.close();
    await stopAll(engine);
  });

  const disconnects = (): number => engine.stdout.lines.filter((l) => l.includes('"worker disconnected"')).length;

  it('holds a request whose scoped middleware is away and runs it on the worker that comes back', async () => {
    worker = await connectWorker(engine.workerUrl, 'first');
    expect((await waitForStatus(`${engine.httpUrl}/mwg/item`, (s) => s === 200)).json()).toEqual({ by: 'first', mw: 'first' });

    const before = disconnects();
    await worker.close();
    await engine.stdout.waitFor(() => disconnects() > before, 5000, 'worker disconnected');
    const started = Date.now();
    const pending = http(`${engine.httpUrl}/mwg/item`);
    // The request is held (in flight, its middleware away) before the worker comes back.
    await waitUntil(async () => /switchyard_http_requests_in_flight 1\b/.test((await http(`${engine.adminUrl}/metrics`)).text), 5000, 'the request to be held');
    worker = await connectWorker(engine.workerUrl, 'second');
    const res = await pending;
    expect({ status: res.status, body: res.json() }).toEqual({ status: 200, body: { by: 'second', mw: 'second' } });
    expect(Date.now() - started).toBeLessThan(GRACE_MS);
  });

  it('fails the request with 500 MIDDLEWARE_FAILED once the grace is over, then the route is gone', async () => {
    const before = disconnects();
    await worker?.close();
    worker = undefined;
    await engine.stdout.waitFor(() => disconnects() > before, 5000, 'worker disconnected');
    const started = Date.now();
    const res = await http(`${engine.httpUrl}/mwg/item`);
    const elapsed = Date.now() - started;
    expectErrorEnvelope(res, 500, 'MIDDLEWARE_FAILED');
    expect(elapsed).toBeGreaterThan(GRACE_MS - 1000);
    expect(elapsed).toBeLessThan(GRACE_MS + 1500);
    expectErrorEnvelope(await waitForStatus(`${engine.httpUrl}/mwg/item`, (s) => s === 404, {}, 5000), 404, 'NOT_FOUND');
  });
});
