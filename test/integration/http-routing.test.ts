import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorEnvelope } from '../support/assertions.js';
import { http, waitForStatus } from '../support/http.js';
import type { InProcessEngine } from '../support/in-process.js';
import type { WorkerHandle } from '../support/processes.js';
import { startWorker, stopAll, WORKER_READY_MS } from '../support/processes.js';
import { startInProcessEngine, startInProcessWithHttpWorker } from '../support/in-process.js';

// Route matching (http-module.md §2.2, §4 rules 2 and 4, §7 not-found rows; architecture.md decisions).
describe('routing with default config (ignore_trailing_slash false, no not_found_function)', () => {
  let engine: InProcessEngine;
  let worker: WorkerHandle;

  beforeAll(async () => {
    ({ engine, worker } = await startInProcessWithHttpWorker());
  });
  afterAll(() => stopAll(worker, engine));

  it('binds api_path and http_method: the trigger metadata names the pattern, path is the actual path', async () => {
    const res = await http(`${engine.httpUrl}/echo/abc`);
    expect(res.status).toBe(200);
    const body = res.json();
    expect(body.path).toBe('/echo/abc');
    expect(body.method).toBe('GET');
    expect(body.path_params).toEqual({ id: 'abc' });
    expect(body.trigger).toEqual({ type: 'http', path: '/echo/:id', method: 'GET' });
  });

  it('extracts several :name segments', async () => {
    const res = await http(`${engine.httpUrl}/echo/first/second`, { method: 'PUT' });
    expect(res.status).toBe(200);
    expect(res.json().path_params).toEqual({ a: 'first', b: 'second' });
  });

  it('percent-decodes path parameters (an encoded "/" stays inside the segment)', async () => {
    const res = await http(`${engine.httpUrl}/echo/hello%20w%C3%B6rld%2Fx`);
    expect(res.status).toBe(200);
    expect(res.json().path_params).toEqual({ id: 'hello wörld/x' });
  });

  it('matches a :name segment to exactly one non-empty segment', async () => {
    expectErrorEnvelope(await http(`${engine.httpUrl}/echo/a/b/c`), 404, 'NOT_FOUND');
    expectErrorEnvelope(await http(`${engine.httpUrl}/echo/`), 404, 'NOT_FOUND');
  });

  it('treats every pattern character other than a leading ":" literally', async () => {
    const res = await http(`${engine.httpUrl}/literal/*/x:y`);
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ path: '/literal/*/x:y', params: {} });
    expectErrorEnvelope(await http(`${engine.httpUrl}/literal/anything/x:y`), 404, 'NOT_FOUND');
    expectErrorEnvelope(await http(`${engine.httpUrl}/literal/*/xy`), 404, 'NOT_FOUND');
  });

  it('matches the method: the same path with another method is 405 with Allow, as iii answers', async () => {
    const res = await http(`${engine.httpUrl}/echo/abc`, { method: 'POST' });
    expectErrorEnvelope(res, 405, 'METHOD_NOT_ALLOWED');
    expect(res.headers.allow).toBe('GET, HEAD');
  });

  it('accepts a lower-case http_method in the trigger config', async () => {
    const res = await http(`${engine.httpUrl}/lower-method`, { method: 'PATCH' });
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ method: 'PATCH', trigger: { type: 'http', path: '/lower-method', method: 'PATCH' } });
  });

  it('prefers a static segment over a parameter', async () => {
    const me = await http(`${engine.httpUrl}/users/me`);
    expect(me.status).toBe(200);
    expect(me.json()).toEqual({ which: 'static' });
    const other = await http(`${engine.httpUrl}/users/42`);
    expect(other.status).toBe(200);
    expect(other.json()).toEqual({ which: 'param', id: '42' });
  });

  it('backtracks from a static branch that dead-ends into the parameter branch', async () => {
    const res = await http(`${engine.httpUrl}/users/me/posts`);
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ which: 'posts', id: 'me' });
  });

  it('treats a route with and without a trailing slash as distinct', async () => {
    expect((await http(`${engine.httpUrl}/slash/`)).json()).toEqual({ which: 'with-slash' });
    expectErrorEnvelope(await http(`${engine.httpUrl}/slash`), 404, 'NOT_FOUND');
    expect((await http(`${engine.httpUrl}/noslash`)).json()).toEqual({ which: 'no-slash' });
    expectErrorEnvelope(await http(`${engine.httpUrl}/noslash/`), 404, 'NOT_FOUND');
  });

  it('answers HEAD from the GET route, without a body', async () => {
    const get = await http(`${engine.httpUrl}/head-test`);
    expect(get.json()).toEqual({ method: 'GET' });
    const head = await http(`${engine.httpUrl}/head-test`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    expect(head.headers['content-type']).toBe('application/json');
    // The handler saw the HEAD request (method HEAD) and its body was not sent.
    expect(head.headers['content-length']).toBe(String(Buffer.byteLength(JSON.stringify({ method: 'HEAD' }))));
  });

  it('does not fall back to GET for HEAD when the path has no GET route', async () => {
    const res = await http(`${engine.httpUrl}/echo`, { method: 'HEAD' });
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('POST');
    expect(res.text).toBe('');
  });

  it('answers the default 404 NOT_FOUND envelope when nothing matches', async () => {
    const res = await http(`${engine.httpUrl}/no/such/route?x=1`, { headers: { 'x-request-id': 'nf-1' } });
    const body = expectErrorEnvelope(res, 404, 'NOT_FOUND');
    expect(body.request_id).toBe('nf-1');
  });

  it('rejects a path with invalid percent-encoding with 400 INVALID_PATH', async () => {
    expectErrorEnvelope(await http(`${engine.httpUrl}/echo/%E0%A4%A`), 400, 'INVALID_PATH');
  });
});

describe('routing with ignore_trailing_slash true and a not_found_function', () => {
  let engine: InProcessEngine;
  let worker: WorkerHandle;
  let beforeWorker: Awaited<ReturnType<typeof http>>;

  beforeAll(async () => {
    engine = await startInProcessEngine({ api: { ignore_trailing_slash: true, not_found_function: 'api::notFound' } });
    // Before any worker serves api::notFound, the default 404 is the answer.
    beforeWorker = await http(`${engine.httpUrl}/nope`);
    worker = startWorker('http-worker', engine.workerUrl);
    await waitForStatus(`${engine.httpUrl}/ready`, (s) => s === 200, {}, WORKER_READY_MS);
  });
  afterAll(() => stopAll(worker, engine));

  it('makes a route and the same route with a trailing slash equivalent', async () => {
    for (const path of ['/slash', '/slash/']) {
      const res = await http(`${engine.httpUrl}${path}`);
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
      expect(res.json()).toEqual({ which: 'with-slash' });
    }
    for (const path of ['/noslash', '/noslash/']) {
      const res = await http(`${engine.httpUrl}${path}`);
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
      expect(res.json()).toEqual({ which: 'no-slash' });
    }
    const param = await http(`${engine.httpUrl}/echo/7/`);
    expect(param.status).toBe(200);
    expect(param.json().path_params).toEqual({ id: '7' });
  });

  it('invokes not_found_function with the request when no route matches', async () => {
    const res = await http(`${engine.httpUrl}/nope?x=1`);
    expect(res.status).toBe(404);
    expect(res.json()).toEqual({ custom: true, path: '/nope' });
    // Also for a known path with a method no route has.
    const wrongMethod = await http(`${engine.httpUrl}/users/me`, { method: 'DELETE' });
    expect(wrongMethod.status).toBe(404);
    expect(wrongMethod.json()).toEqual({ custom: true, path: '/users/me' });
  });

  it('falls back to the default 404 while no worker serves not_found_function', () => {
    expectErrorEnvelope(beforeWorker, 404, 'NOT_FOUND');
  });
});
