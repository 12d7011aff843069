import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorEnvelope } from '../support/assertions.js';
import { http } from '../support/http.js';
import type { InProcessEngine } from '../support/in-process.js';
import { startInProcessWithHttpWorker } from '../support/in-process.js';
import type { WorkerHandle } from '../support/processes.js';
import { stopAll } from '../support/processes.js';

// CORS (http-module.md §2.1 `cors`; unset behaviour is "not shown": architecture.md makes it permissive).
const APP = 'https://app.example.com';
const OTHER = 'https://evil.example.net';

describe('CORS unset: permissive', () => {
  let engine: InProcessEngine;
  let worker: WorkerHandle;

  beforeAll(async () => {
    ({ engine, worker } = await startInProcessWithHttpWorker());
  });
  afterAll(() => stopAll(worker, engine));

  it('allows any origin with "*" and no Vary', async () => {
    const res = await http(`${engine.httpUrl}/echo/1`, { headers: { origin: OTHER } });
    expect(res.status).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers.vary).toBeUndefined();
  });

  it('sends no CORS header without an Origin', async () => {
    const res = await http(`${engine.httpUrl}/echo/1`);
    expect(res.status).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('answers a preflight with 204 and the allowed methods and headers', async () => {
    const res = await http(`${engine.httpUrl}/echo/1`, {
      method: 'OPTIONS',
      headers: { origin: OTHER, 'access-control-request-method': 'DELETE', 'access-control-request-headers': 'x-token, content-type' },
    });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(String(res.headers['access-control-allow-methods']).split(/,\s*/)).toEqual(
      expect.arrayContaining(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']),
    );
    expect(res.headers['access-control-allow-headers']).toBe('x-token, content-type');
    expect(res.headers['access-control-max-age']).toBe('600');
  });

  it('puts the CORS header on engine errors too', async () => {
    const res = await http(`${engine.httpUrl}/missing`, { headers: { origin: OTHER } });
    expectErrorEnvelope(res, 404, 'NOT_FOUND');
    expect(res.headers['access-control-allow-origin']).toBe('*');
  });
});

describe('CORS set: only listed origins and methods', () => {
  let engine: InProcessEngine;
  let worker: WorkerHandle;

  beforeAll(async () => {
    ({ engine, worker } = await startInProcessWithHttpWorker({ api: { cors: { allowed_origins: [APP], allowed_methods: ['GET', 'POST'] } } }));
  });
  afterAll(() => stopAll(worker, engine));

  it('reflects a listed origin with Vary: Origin', async () => {
    const res = await http(`${engine.httpUrl}/echo/1`, { headers: { origin: APP } });
    expect(res.status).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe(APP);
    expect(res.headers.vary).toBe('Origin');
  });

  it('sends no CORS header to an unlisted origin (the request itself is served)', async () => {
    const res = await http(`${engine.httpUrl}/echo/1`, { headers: { origin: OTHER } });
    expect(res.status).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('answers a preflight for a listed origin and method with 204 and the configured methods', async () => {
    const res = await http(`${engine.httpUrl}/echo`, {
      method: 'OPTIONS',
      headers: { origin: APP, 'access-control-request-method': 'POST' },
    });
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(APP);
    expect(res.headers.vary).toBe('Origin');
    expect(res.headers['access-control-allow-methods']).toBe('GET, POST');
  });

  it('rejects a preflight for an unlisted method with 403 CORS_NOT_ALLOWED', async () => {
    const res = await http(`${engine.httpUrl}/things/1`, {
      method: 'OPTIONS',
      headers: { origin: APP, 'access-control-request-method': 'DELETE' },
    });
    expectErrorEnvelope(res, 403, 'CORS_NOT_ALLOWED');
    expect(res.headers['access-control-allow-methods']).toBeUndefined();
  });

  it('rejects a preflight from an unlisted origin with 403 CORS_NOT_ALLOWED', async () => {
    const res = await http(`${engine.httpUrl}/echo`, {
      method: 'OPTIONS',
      headers: { origin: OTHER, 'access-control-request-method': 'POST' },
    });
    expectErrorEnvelope(res, 403, 'CORS_NOT_ALLOWED');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });
});
