import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorEnvelope } from '../support/assertions.js';
import { http, waitForStatus } from '../support/http.js';
import type { InProcessEngine } from '../support/in-process.js';
import { startInProcessWithHttpWorker } from '../support/in-process.js';
import type { WorkerHandle } from '../support/processes.js';
import { stopAll } from '../support/processes.js';
import { rawHttp } from '../support/raw-http.js';

// Engine-generated errors (http-module.md §7; architecture.md status table, rows without middleware
// or clustering). WORKER_DISCONNECTED and SHUTTING_DOWN need a worker or the engine to go away: they
// are in http-lifecycle.test.ts.
const TIMEOUT_MS = 2000;
const BODY_LIMIT = 1024;

describe('error responses', () => {
  let engine: InProcessEngine;
  let worker: WorkerHandle;

  beforeAll(async () => {
    ({ engine, worker } = await startInProcessWithHttpWorker({
      // No waiting line: a request over the limit is refused at once (the line itself: iii-http-parity.test.ts).
      api: { default_timeout: TIMEOUT_MS, concurrency_request_limit: 2, concurrency_queue_limit: 0, body_limit: BODY_LIMIT },
    }));
  });
  afterAll(() => stopAll(worker, engine));

  const guardedCalls = async (): Promise<number> => (await http(`${engine.httpUrl}/guarded-calls`)).json().calls;

  describe('condition_function_id', () => {
    it('runs the handler when the condition returns true', async () => {
      const before = await guardedCalls();
      const res = await http(`${engine.httpUrl}/guarded`, { headers: { 'x-allow': 'yes' } });
      expect(res.status).toBe(200);
      expect(res.json()).toEqual({ passed: true });
      expect(await guardedCalls()).toBe(before + 1);
    });

    it('does not call the handler and answers 422 CONDITION_NOT_MET with "skipped": true on false', async () => {
      const before = await guardedCalls();
      for (const headers of [{ 'x-allow': 'no' }, {}] as Record<string, string>[]) {
        const res = await http(`${engine.httpUrl}/guarded`, { headers: { ...headers, 'x-request-id': 'cond-false' } });
        const body = expectErrorEnvelope(res, 422, 'CONDITION_NOT_MET', { extraKeys: ['skipped'] });
        expect(body.skipped).toBe(true);
        expect(body.request_id).toBe('cond-false');
      }
      expect(await guardedCalls()).toBe(before);
    });

    it('blocks only on an explicit false: null, undefined and 0 let the handler run', async () => {
      const before = await guardedCalls();
      for (const answer of ['null', 'undef', 'zero']) {
        const res = await http(`${engine.httpUrl}/guarded`, { headers: { 'x-allow': answer } });
        expect({ answer, status: res.status, body: res.json() }).toEqual({ answer, status: 200, body: { passed: true } });
      }
      expect(await guardedCalls()).toBe(before + 3);
    });

    it('answers 500 with the worker\'s code when the condition function fails, without calling the handler', async () => {
      const before = await guardedCalls();
      const res = await http(`${engine.httpUrl}/guarded`, { headers: { 'x-allow': 'throw' } });
      const body = expectErrorEnvelope(res, 500, 'invocation_failed');
      expect(body.error.message).toBe('condition exploded');
      expect(await guardedCalls()).toBe(before);
    });
  });

  describe('body_limit', () => {
    it('accepts a body of exactly body_limit bytes', async () => {
      const res = await http(`${engine.httpUrl}/body-size`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain' },
        body: 'b'.repeat(BODY_LIMIT),
      });
      expect(res.status).toBe(200);
      expect(res.json()).toEqual({ type: 'string', length: BODY_LIMIT });
    });

    it('answers 413 PAYLOAD_TOO_LARGE for a declared Content-Length over the limit, before reading the body', async () => {
      const [res, ...rest] = await rawHttp(
        engine.httpUrl,
        `POST /body-size HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${BODY_LIMIT + 1}\r\n\r\n`,
      );
      expect(rest).toEqual([]);
      expectErrorEnvelope(res!, 413, 'PAYLOAD_TOO_LARGE');
      expect(res!.headers.connection).toBe('close');
    });

    it('answers 413 PAYLOAD_TOO_LARGE for a body sent over the limit', async () => {
      const res = await http(`${engine.httpUrl}/body-size`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain' },
        body: 'b'.repeat(BODY_LIMIT + 1),
      });
      expectErrorEnvelope(res, 413, 'PAYLOAD_TOO_LARGE');
    });

    it('reads a chunked body (no Content-Length) under the limit', async () => {
      const half = 'c'.repeat(BODY_LIMIT / 2);
      const chunk = `${(BODY_LIMIT / 2).toString(16)}\r\n${half}\r\n`;
      const [res] = await rawHttp(
        engine.httpUrl,
        `POST /body-size HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunk}${chunk}0\r\n\r\n`,
      );
      expect(res!.status).toBe(200);
      expect(JSON.parse(res!.text)).toEqual({ type: 'string', length: BODY_LIMIT });
    });

    it('answers 413 PAYLOAD_TOO_LARGE once a chunked body without Content-Length passes the limit', async () => {
      const chunk = `258\r\n${'d'.repeat(0x258)}\r\n`; // 600 bytes; two of them pass 1024
      const started = performance.now();
      // The body never ends: the engine must answer on the bytes counted, not wait for the end.
      const [res, ...rest] = await rawHttp(
        engine.httpUrl,
        `POST /body-size HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n${chunk}${chunk}`,
      );
      expect(performance.now() - started).toBeLessThan(TIMEOUT_MS / 2);
      expect(rest).toEqual([]);
      expectErrorEnvelope(res!, 413, 'PAYLOAD_TOO_LARGE');
      expect(res!.headers.connection).toBe('close');
    });
  });

  it('answers 400 INVALID_JSON for a JSON body that does not parse', async () => {
    for (const type of ['application/json', 'application/problem+json']) {
      const res = await http(`${engine.httpUrl}/echo`, { method: 'POST', headers: { 'content-type': type }, body: '{"a":' });
      expectErrorEnvelope(res, 400, 'INVALID_JSON');
    }
  });

  it('answers 503 OVERLOADED with Retry-After beyond concurrency_request_limit when the waiting line is full, and recovers', async () => {
    const slow = [1, 2].map((i) => http(`${engine.httpUrl}/slow?ms=1500`, { headers: { 'x-request-id': `ovl-${i}` } }));
    // Both are admitted and inside the handler: the limit (2) is used up.
    await Promise.all([1, 2].map((i) => worker.stdout.waitFor((line) => line === `slow-start ovl-${i}`, 5000, `slow ovl-${i}`)));
    const third = await http(`${engine.httpUrl}/echo/1`, { headers: { 'x-request-id': 'ovl-3' } });
    expectErrorEnvelope(third, 503, 'OVERLOADED');
    expect(third.headers['retry-after']).toBe('1');
    const done = await Promise.all(slow);
    expect(done.map((r) => r.status)).toEqual([200, 200]);
    await waitForStatus(`${engine.httpUrl}/echo/1`, (s) => s === 200, {}, 5000);
  });

  it('answers 503 FUNCTION_UNAVAILABLE with Retry-After when no worker registers the route\'s function', async () => {
    const res = await http(`${engine.httpUrl}/nobody`);
    expectErrorEnvelope(res, 503, 'FUNCTION_UNAVAILABLE');
    expect(res.headers['retry-after']).toBe('1');
  });

  it('answers 500 with the worker\'s own code and message when the handler throws', async () => {
    const body = expectErrorEnvelope(await http(`${engine.httpUrl}/throws`), 500, 'invocation_failed');
    expect(body.error.message).toBe('boom from handler');
  });

  it('answers 504 TIMEOUT when the handler outlives default_timeout', async () => {
    const started = performance.now();
    const res = await http(`${engine.httpUrl}/slow?ms=${TIMEOUT_MS * 3}`, { headers: { 'x-request-id': 'slow-timeout' } });
    const elapsed = performance.now() - started;
    const body = expectErrorEnvelope(res, 504, 'TIMEOUT');
    expect(body.request_id).toBe('slow-timeout');
    expect(elapsed).toBeLessThan(TIMEOUT_MS * 2);
  });

  it.each([
    ['a header value with CR/LF', '/bad-header-value'],
    ['a header name that is not a token', '/bad-header-name'],
  ])('drops %s and sends the rest of the response, as iii does', async (_what, path) => {
    const res = await http(`${engine.httpUrl}${path}`);
    expect([res.status, res.text]).toEqual([200, '{}']);
    expect(res.headers.injected).toBeUndefined();
    expect(res.headers['x-evil']).toBeUndefined();
  });

  describe('502 INVALID_RESPONSE', () => {
    it.each([
      ['a status_code outside 200-599', '/bad-status'],
      ['an undefined result', '/undefined'],
    ])('for %s', async (_what, path) => {
      const res = await http(`${engine.httpUrl}${path}`);
      expectErrorEnvelope(res, 502, 'INVALID_RESPONSE');
      expect(res.headers.injected).toBeUndefined();
      expect(res.headers['x-evil']).toBeUndefined();
    });
  });
});
