import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../support/http.js';
import type { InProcessEngine } from '../support/in-process.js';
import { startInProcessWithHttpWorker } from '../support/in-process.js';
import type { WorkerHandle } from '../support/processes.js';
import { stopAll } from '../support/processes.js';

// Turning a handler's ApiResponse into HTTP (http-module.md §2.4, §4 "Response"; architecture.md).
describe('ApiResponse to HTTP', () => {
  let engine: InProcessEngine;
  let worker: WorkerHandle;

  beforeAll(async () => {
    ({ engine, worker } = await startInProcessWithHttpWorker());
  });
  afterAll(() => stopAll(worker, engine));

  it('takes the HTTP status from status_code', async () => {
    for (const code of [200, 202, 418, 503]) {
      const res = await http(`${engine.httpUrl}/status/${code}`);
      expect(res.status).toBe(code);
      expect(res.json()).toEqual({ code });
    }
  });

  it('sends headers given as "Name: value" strings, repeated names included', async () => {
    const res = await http(`${engine.httpUrl}/created`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"n":1}',
    });
    expect(res.status).toBe(201);
    expect(res.headers['x-created']).toBe('yes');
    expect(res.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.json()).toEqual({ got: { n: 1 } });
  });

  it('sends headers given as a map, with number values and arrays for repeated names', async () => {
    const res = await http(`${engine.httpUrl}/map-headers`);
    expect(res.status).toBe(200);
    expect(res.headers['x-one']).toBe('1');
    expect(res.headers['x-num']).toBe('42');
    expect(res.headers['set-cookie']).toEqual(['c=1', 'd=2']);
    expect(res.json()).toEqual({ ok: true });
  });

  it('sends a string body with a content type as is', async () => {
    const text = await http(`${engine.httpUrl}/text`);
    expect(text.status).toBe(200);
    expect(text.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(text.text).toBe('plain text');
    const json = await http(`${engine.httpUrl}/json-string-ct`);
    expect(json.headers['content-type']).toBe('application/json');
    expect(json.text).toBe('{"raw":true}');
  });

  it('JSON-encodes a string body without a content type', async () => {
    const res = await http(`${engine.httpUrl}/string-json`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.text).toBe('"just a string"');
  });

  it('JSON-encodes an object body and keeps the handler\'s own content type', async () => {
    const res = await http(`${engine.httpUrl}/object-ct`);
    expect(res.headers['content-type']).toBe('application/vnd.switchyard+json');
    expect(res.text).toBe('{"typed":true}');
    expect(res.headers['content-length']).toBe(String(res.text.length));
  });

  it('sends 204 without a body', async () => {
    const res = await http(`${engine.httpUrl}/things/9`, { method: 'DELETE' });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect(res.headers['content-type']).toBeUndefined();
    const withBody = await http(`${engine.httpUrl}/no-content-body`);
    expect(withBody.status).toBe(204);
    expect(withBody.text).toBe('');
  });

  it('sends null as JSON for a null body, as iii does', async () => {
    const res = await http(`${engine.httpUrl}/null-body`);
    expect(res.status).toBe(200);
    expect(res.text).toBe('null');
    expect(res.headers['content-length']).toBe('4');
    expect(res.headers['content-type']).toBe('application/json');
  });

  it('adds the request id header to handler responses', async () => {
    const res = await http(`${engine.httpUrl}/text`, { headers: { 'x-request-id': 'resp-1' } });
    expect(res.headers['x-request-id']).toBe('resp-1');
  });
});
