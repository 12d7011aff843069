// Issue 23, attack 1 and the smaller findings at the HTTP port: requests that once switched the
// framing guard off for the rest of their connection (so later smuggling forms reached handlers),
// a header block that was silently truncated, and a request without Host answered by Node bare.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorEnvelope } from '../support/assertions.js';
import { http } from '../support/http.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import type { RawResponse } from '../support/raw-http.js';
import { rawHttp } from '../support/raw-http.js';
import { RawWorker } from '../support/raw-worker.js';

describe('front door: the framing guard cannot be disarmed (issue 23)', () => {
  let engine: EngineHandle;
  let worker: RawWorker;
  const paths: string[] = [];

  beforeAll(async () => {
    engine = await startEngine({ logLevel: 'info' });
    worker = await RawWorker.connect(engine.workerUrl);
    for (const [id, method] of [['fd::get', 'GET'], ['fd::post', 'POST']] as const) {
      worker.route(id, method, `/fd/${method.toLowerCase()}/:id`);
      worker.serve(id, (data: any) => {
        paths.push(String(data.path));
        return { status_code: 200, body: { path: data.path, headers: Object.keys(data.headers ?? {}).length } };
      });
    }
    await worker.sync();
  });
  afterAll(async () => {
    await worker?.close();
    await engine?.stop();
  });

  const smuggled = (n: string): string[] => [
    `POST /fd/post/${n}-identity HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n`,
    `POST /fd/post/${n}-upper HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n`,
    `POST /fd/post/${n}-tab HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\tchunked\r\n\r\n0\r\n\r\n`,
    `GET  /fd/get/${n}-space HTTP/1.1\r\nHost: x\r\n\r\n`,
  ];

  /** The disarming request first, then one smuggling form per connection: never reaches a handler. */
  async function attack(name: string, first: string, expectFirst: number[]): Promise<void> {
    for (const [k, form] of smuggled(name).entries()) {
      const responses: RawResponse[] = await rawHttp(engine.httpUrl, `${first}${form}`);
      const statuses = responses.map((r) => r.status);
      expect({ name, k, statuses }).toEqual({ name, k, statuses: [...expectFirst, 400] });
      const last = responses.at(-1) as RawResponse;
      expectErrorEnvelope(last, 400, 'MALFORMED_REQUEST');
      expect(last.headers.connection).toBe('close');
    }
    expect(paths.filter((p) => p.includes(`${name}-`))).toEqual([]);
  }

  it('keeps checking after a request with Upgrade but no Connection: upgrade', async () => {
    await attack('upgrade', 'GET /fd/get/u HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n', [200]);
  });

  it('refuses a 16-digit Content-Length itself, and what follows it', async () => {
    await attack('length', 'POST /fd/post/l HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000000\r\n\r\n', []);
  });

  it('refuses a chunk size of 13 hex digits itself, and what follows it', async () => {
    await attack('chunk', 'POST /fd/post/c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000\r\nab\r\n', []);
  });

  it('refuses anything pipelined after a real upgrade request', async () => {
    await attack('real-upgrade', 'GET /fd/get/r HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n', [200]);
  });

  it('answers 2,000 small headers (22.9 KB) 431 HEADERS_TOO_LARGE, never truncating them', async () => {
    const headers = Array.from({ length: 2000 }, (_, i) => `x-h${i}: ${i}\r\n`).join('');
    const responses = await rawHttp(engine.httpUrl, `GET /fd/get/many HTTP/1.1\r\nHost: x\r\n${headers}\r\n`);
    expect(responses.map((r) => r.status)).toEqual([431]);
    expectErrorEnvelope(responses[0] as RawResponse, 431, 'HEADERS_TOO_LARGE');
    const justOver = Array.from({ length: 100 }, (_, i) => `x-h${i}: ${i}\r\n`).join('');
    expect((await rawHttp(engine.httpUrl, `GET /fd/get/over HTTP/1.1\r\nHost: x\r\n${justOver}\r\n`)).map((r) => r.status)).toEqual([431]);
    const atLimit = Array.from({ length: 98 }, (_, i) => `x-h${i}: ${i}\r\n`).join('');
    const ok = await rawHttp(engine.httpUrl, `GET /fd/get/limit HTTP/1.1\r\nHost: x\r\n${atLimit}Connection: close\r\n\r\n`);
    expect(ok.map((r) => r.status)).toEqual([200]);
    expect(paths.filter((p) => p.endsWith('/many') || p.endsWith('/over'))).toEqual([]);
  });

  it('answers a request without Host with the error envelope', async () => {
    const responses = await rawHttp(engine.httpUrl, 'GET /fd/get/nohost HTTP/1.1\r\n\r\n');
    expect(responses.length).toBe(1);
    expectErrorEnvelope(responses[0] as RawResponse, 400, 'MALFORMED_REQUEST');
    expect((await http(`${engine.httpUrl}/fd/get/after`)).status).toBe(200);
  });
});
