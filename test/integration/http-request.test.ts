import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorEnvelope } from '../support/assertions.js';
import { http } from '../support/http.js';
import type { InProcessEngine } from '../support/in-process.js';
import { startInProcessWithHttpWorker } from '../support/in-process.js';
import type { WorkerHandle } from '../support/processes.js';
import { stopAll } from '../support/processes.js';
import { rawHttp } from '../support/raw-http.js';

// The ApiRequest a handler receives (http-module.md §2.3) and the request-side config fields (§2.1):
// body_limit default, trust_proxy, request_id_header. Bodies and extensions per architecture.md.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const DEFAULT_BODY_LIMIT = 1_048_576;

describe('ApiRequest with default config', () => {
  let engine: InProcessEngine;
  let worker: WorkerHandle;

  beforeAll(async () => {
    ({ engine, worker } = await startInProcessWithHttpWorker());
  });
  afterAll(() => stopAll(worker, engine));

  const post = (body: string | Buffer, contentType?: string) =>
    http(`${engine.httpUrl}/echo`, {
      method: 'POST',
      body,
      headers: contentType === undefined ? {} : { 'content-type': contentType },
    });

  it('delivers every ApiRequest field', async () => {
    const res = await http(`${engine.httpUrl}/echo/42?q=x&n=1`, { headers: { 'x-request-id': 'req-fields-1' } });
    expect(res.status).toBe(200);
    const req = res.json();
    expect(Object.keys(req).sort()).toEqual(
      // request_body and response: the handler's channel refs (docs/streaming.md), as iii sends them.
      ['body', 'context', 'headers', 'ip', 'method', 'path', 'path_params', 'query_params', 'request_body', 'request_id', 'response', 'trigger'].sort(),
    );
    expect(req.path).toBe('/echo/42');
    expect(req.method).toBe('GET');
    expect(req.path_params).toEqual({ id: '42' });
    expect(req.query_params).toEqual({ q: 'x', n: '1' });
    expect(req.body).toBeNull();
    expect(req.headers['x-request-id']).toBe('req-fields-1');
    expect(req.trigger).toEqual({ type: 'http', path: '/echo/:id', method: 'GET' });
    expect(req.context).toEqual({});
    expect(req.request_id).toBe('req-fields-1');
    expect(req.ip).toBe('127.0.0.1');
  });

  it('keeps the last value of a repeated query parameter and decodes them', async () => {
    const res = await http(`${engine.httpUrl}/echo/1?a=1&a=2&b=x%20y&c=&a=3`);
    expect(res.json().query_params).toEqual({ a: '3', b: 'x y', c: '' });
  });

  it('gives an empty query_params object when there is no query string', async () => {
    expect((await http(`${engine.httpUrl}/echo/1`)).json().query_params).toEqual({});
  });

  it('gives header names in lower case', async () => {
    const res = await http(`${engine.httpUrl}/echo/1`, { headers: { 'X-Mixed-Case': 'Value Kept', ACCEPT: 'text/x-custom' } });
    const headers = res.json().headers as Record<string, string>;
    expect(headers['x-mixed-case']).toBe('Value Kept');
    expect(headers.accept).toBe('text/x-custom');
    expect(Object.keys(headers).every((name) => name === name.toLowerCase())).toBe(true);
  });

  it('parses an application/json body', async () => {
    const res = await post('{"a":1,"nested":{"b":[1,2]}}', 'application/json; charset=utf-8');
    expect(res.status).toBe(200);
    expect(res.json().body).toEqual({ a: 1, nested: { b: [1, 2] } });
  });

  it('parses a +json body', async () => {
    const res = await post('[1,"two"]', 'application/vnd.api+json');
    expect(res.json().body).toEqual([1, 'two']);
  });

  it('parses an application/x-www-form-urlencoded body to an object (last value wins)', async () => {
    const res = await post('a=1&b=two+words&a=3&c=%26', 'application/x-www-form-urlencoded');
    expect(res.json().body).toEqual({ a: '3', b: 'two words', c: '&' });
  });

  it('delivers a text/* body as a string', async () => {
    const res = await post('héllo\nworld', 'text/plain; charset=utf-8');
    expect(res.json().body).toBe('héllo\nworld');
    const csv = await post('a,b\n1,2', 'text/csv');
    expect(csv.json().body).toBe('a,b\n1,2');
  });

  it('delivers any other body as a base64 string', async () => {
    const bytes = Buffer.from([0, 1, 2, 0xfe, 0xff]);
    const res = await post(bytes, 'application/octet-stream');
    expect(res.json().body).toBe(bytes.toString('base64'));
    const untyped = await post(Buffer.from('no type'));
    expect(untyped.json().body).toBe(Buffer.from('no type').toString('base64'));
  });

  it('delivers an empty body as null, whatever the content type', async () => {
    expect((await post('', 'application/json')).json().body).toBeNull();
    expect((await post('', 'text/plain')).json().body).toBeNull();
    expect((await http(`${engine.httpUrl}/echo`, { method: 'POST' })).json().body).toBeNull();
  });

  it('generates a request id when none is sent: in the response header, request_id and headers', async () => {
    const res = await http(`${engine.httpUrl}/echo/1`);
    const id = res.headers['x-request-id'];
    expect(id).toMatch(UUID);
    expect(res.json().request_id).toBe(id);
    expect(res.json().headers['x-request-id']).toBe(id);
    const next = await http(`${engine.httpUrl}/echo/1`);
    expect(next.headers['x-request-id']).toMatch(UUID);
    expect(next.headers['x-request-id']).not.toBe(id);
  });

  it('propagates an incoming x-request-id', async () => {
    const res = await http(`${engine.httpUrl}/echo/1`, { headers: { 'X-Request-Id': 'abc-123' } });
    expect(res.headers['x-request-id']).toBe('abc-123');
    expect(res.json().request_id).toBe('abc-123');
    expect(res.json().headers['x-request-id']).toBe('abc-123');
  });

  it('replaces an unusable incoming request id (spaces, too long) with a generated one', async () => {
    for (const sent of ['has spaces', 'x'.repeat(129)]) {
      const res = await http(`${engine.httpUrl}/echo/1`, { headers: { 'x-request-id': sent } });
      expect(res.headers['x-request-id']).toMatch(UUID);
      expect(res.json().request_id).toBe(res.headers['x-request-id']);
      expect(res.json().headers['x-request-id']).toBe(res.headers['x-request-id']);
    }
  });

  it('ignores X-Forwarded-For for ip when trust_proxy is off (default)', async () => {
    const res = await http(`${engine.httpUrl}/echo/1`, { headers: { 'x-forwarded-for': '203.0.113.7' } });
    expect(res.json().ip).toBe('127.0.0.1');
    expect(res.json().headers['x-forwarded-for']).toBe('203.0.113.7');
  });

  it('accepts a body of exactly the default body_limit (1 MiB)', async () => {
    const res = await http(`${engine.httpUrl}/body-size`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'a'.repeat(DEFAULT_BODY_LIMIT),
    });
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ type: 'string', length: DEFAULT_BODY_LIMIT });
  });

  it('rejects a declared Content-Length of one byte over the default body_limit with 413', async () => {
    const [res] = await rawHttp(
      engine.httpUrl,
      `POST /body-size HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${DEFAULT_BODY_LIMIT + 1}\r\n\r\n`,
    );
    expect(res).toBeDefined();
    expectErrorEnvelope(res!, 413, 'PAYLOAD_TOO_LARGE');
    expect(res!.headers.connection).toBe('close');
  });
});

describe('ApiRequest with trust_proxy true and a custom request_id_header', () => {
  let engine: InProcessEngine;
  let worker: WorkerHandle;

  beforeAll(async () => {
    ({ engine, worker } = await startInProcessWithHttpWorker({ api: { trust_proxy: true, request_id_header: 'X-Correlation-Id' } }));
  });
  afterAll(() => stopAll(worker, engine));

  it('takes ip from the left-most X-Forwarded-For entry', async () => {
    const single = await http(`${engine.httpUrl}/echo/1`, { headers: { 'x-forwarded-for': '203.0.113.7' } });
    expect(single.json().ip).toBe('203.0.113.7');
    const chain = await http(`${engine.httpUrl}/echo/1`, { headers: { 'x-forwarded-for': '198.51.100.1, 10.0.0.2' } });
    expect(chain.json().ip).toBe('198.51.100.1');
  });

  it('falls back to the socket address without X-Forwarded-For', async () => {
    expect((await http(`${engine.httpUrl}/echo/1`)).json().ip).toBe('127.0.0.1');
  });

  it('propagates the request id from the configured header', async () => {
    const res = await http(`${engine.httpUrl}/echo/1`, { headers: { 'x-correlation-id': 'corr-77', 'x-request-id': 'ignored' } });
    expect(res.headers['x-correlation-id']).toBe('corr-77');
    expect(res.headers['x-request-id']).toBeUndefined();
    expect(res.json().request_id).toBe('corr-77');
    expect(res.json().headers['x-correlation-id']).toBe('corr-77');
    expect(res.json().headers['x-request-id']).toBe('ignored');
  });

  it('generates the id under the configured header when none is sent', async () => {
    const res = await http(`${engine.httpUrl}/echo/1`);
    const id = res.headers['x-correlation-id'];
    expect(id).toMatch(UUID);
    expect(res.headers['x-request-id']).toBeUndefined();
    expect(res.json().request_id).toBe(id);
    expect(res.json().headers['x-correlation-id']).toBe(id);
  });

  it('puts the configured header in error responses too', async () => {
    const res = await http(`${engine.httpUrl}/missing`, { headers: { 'x-correlation-id': 'corr-404' } });
    const body = expectErrorEnvelope(res, 404, 'NOT_FOUND', { requestIdHeader: 'x-correlation-id' });
    expect(body.request_id).toBe('corr-404');
  });
});
