import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { startEngine, startWorker } from '../support/processes.js';
import { http, waitForStatus } from '../support/http.js';

describe('engine with one iii-sdk worker', () => {
  let engine: EngineHandle;
  let worker: WorkerHandle;

  beforeAll(async () => {
    engine = await startEngine();
    worker = startWorker('http-worker', engine.workerUrl);
    await waitForStatus(`${engine.httpUrl}/echo/1`, (s) => s === 200);
  });
  afterAll(async () => {
    await worker?.stop();
    await engine?.stop();
  });

  it('serves a route registered by the worker', async () => {
    const res = await http(`${engine.httpUrl}/echo/42?q=x`);
    expect(res.status).toBe(200);
    const body = res.json();
    expect(body.path_params).toEqual({ id: '42' });
    expect(body.trigger).toEqual({ type: 'http', path: '/echo/:id', method: 'GET' });
  });

  it('answers 404 NOT_FOUND for an unknown path', async () => {
    const res = await http(`${engine.httpUrl}/nothing-here`);
    expect(res.status).toBe(404);
    expect(res.json().error.code).toBe('NOT_FOUND');
  });
});
