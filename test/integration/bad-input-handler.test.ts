import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { expectErrorEnvelope } from '../support/assertions.js';
import { http } from '../support/http.js';
import type { InProcessEngine } from '../support/in-process.js';
import { startInProcessEngine } from '../support/in-process.js';
import { RawWorker } from '../support/raw-worker.js';

// Bad handler output (reliability issue, "handler output" suite): a raw worker answers with exactly
// the frame under test, since the wire is JSON text and an SDK would never send most of these. Every
// test asserts the exact answer and that the engine answers a good request with 200 afterwards.
// Where each item of the issue is covered:
// - invalid status (0, 99, 600, 1000, "abc", negative, float, 1e400, 1xx, …) → 502 INVALID_RESPONSE:
//   here; http-errors.test.ts "502 INVALID_RESPONSE" (42, with an iii-sdk worker); unit: response.test.ts
// - header values with CR/LF or control characters → 502, nothing injected: here (both header forms,
//   Set-Cookie arrays); http-errors.test.ts (iii-sdk worker); unit: response.test.ts
// - invalid header names → 502: here; http-errors.test.ts; unit: response.test.ts
// - values JSON can carry that are not what they seem: numbers beyond a double (bodies served as
//   JSON reads them, 1e400 header values refused), bodies nested too deep to serialise (502), lone
//   surrogates (served), headers as numbers/strings/objects (502), results that are not objects
//   (502; an undefined result also in http-errors.test.ts): here
// - frames that are not JSON text: not JSON (ignored → 504 at the deadline), not UTF-8 in a text
//   frame (1007 → 502 WORKER_DISCONNECTED), not UTF-8 in a binary frame (U+FFFD): here;
//   worker-protocol.test.ts "logs and ignores malformed frames …" (no HTTP request involved)
// - enormous bodies: several MB under max_frame_bytes served, a result over it → 1009 and 502
//   WORKER_DISCONNECTED at once: here; worker-protocol.test.ts "refuses a frame above max_frame_bytes …"
const TIMEOUT_MS = 3000;
const MAX_FRAME_BYTES = 4 * 1024 * 1024;
const STATUS_MESSAGE = (raw: string) =>
  `invalid handler response: invalid status_code ${JSON.stringify(JSON.parse(raw))} (must be an integer 200-599)`;

/**
 * Answers every invocation of `functionId`: a string is the `result`, spliced verbatim into the
 * invocationresult frame; a Buffer is the whole frame, sent as is (as a text frame unless `binary`).
 */
function serveRaw(
  worker: RawWorker,
  functionId: string,
  answer: (data: any, invocationId: string) => string | Buffer,
  options: { binary?: boolean } = {},
): void {
  worker.ws.on('message', (raw: WebSocket.RawData) => {
    const frame = JSON.parse((raw as Buffer).toString('utf8'));
    if (frame.type !== 'invokefunction' || frame.function_id !== functionId) return;
    const result = answer(frame.data, frame.invocation_id);
    const bytes = Buffer.isBuffer(result)
      ? result
      : `{"type":"invocationresult","invocation_id":${JSON.stringify(frame.invocation_id)},"function_id":${JSON.stringify(functionId)},"result":${result}}`;
    worker.ws.send(bytes, { binary: options.binary ?? false });
  });
}

/** An invocationresult frame whose body string holds bytes 0xC3 0x28: not UTF-8. */
const notUtf8Result = (functionId: string, invocationId: string) =>
  Buffer.concat([
    Buffer.from(`{"type":"invocationresult","invocation_id":"${invocationId}","function_id":"${functionId}","result":{"body":{"s":"a`),
    Buffer.from([0xc3, 0x28]),
    Buffer.from('"}}}'),
  ]);

const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

describe('bad handler output', () => {
  let engine: InProcessEngine;
  let worker: RawWorker;
  const extraWorkers: RawWorker[] = [];

  beforeAll(async () => {
    engine = await startInProcessEngine({ api: { default_timeout: TIMEOUT_MS }, workers: { max_frame_bytes: MAX_FRAME_BYTES }, logLevel: 'info' });
    worker = await RawWorker.connect(engine.workerUrl);
    worker.route('out::ok', 'GET', '/out/ok');
    worker.serve('out::ok', () => ({ status_code: 200, body: { ok: true } }));
    // The result is the query parameter `r`, verbatim.
    worker.route('out::raw', 'GET', '/out/raw');
    serveRaw(worker, 'out::raw', (data) => data.query_params.r);
    // Results too big or too deep for a query string, built here.
    worker.route('out::deep', 'GET', '/out/deep/:depth');
    serveRaw(worker, 'out::deep', (data) => `{"body":${nested(Number(data.path_params.depth))}}`);
    worker.route('out::big', 'GET', '/out/big/:bytes');
    serveRaw(worker, 'out::big', (data) => `{"headers":{"content-type":"text/plain"},"body":"${'x'.repeat(Number(data.path_params.bytes))}"}`);
    worker.route('out::bigJson', 'GET', '/out/big-json/:items');
    serveRaw(worker, 'out::bigJson', (data) => `{"body":[${Array.from({ length: Number(data.path_params.items) }, () => '"0123456789abcdef"').join(',')}]}`);
    worker.route('out::garbage', 'GET', '/out/garbage');
    serveRaw(worker, 'out::garbage', () => Buffer.from('this is not JSON {'));
    await worker.sync();
  });
  afterAll(async () => {
    for (const w of [...extraWorkers, worker]) await w?.close();
    await engine?.stop();
  });

  async function keepsServing(): Promise<void> {
    const res = await http(`${engine.httpUrl}/out/ok`);
    expect(res.status).toBe(200);
    expect(res.json()).toStrictEqual({ ok: true });
  }

  const raw = (result: string, headers: Record<string, string> = {}) =>
    http(`${engine.httpUrl}/out/raw?r=${encodeURIComponent(result)}`, { headers });

  /** 502 INVALID_RESPONSE with exactly this message, and nothing of the handler's answer leaked. */
  async function expectInvalid(result: string, message: string): Promise<void> {
    const res = await raw(result, { 'x-request-id': 'bad-out' });
    expect({ result, status: res.status }).toEqual({ result, status: 502 });
    const body = expectErrorEnvelope(res, 502, 'INVALID_RESPONSE');
    expect({ result, message: body.error.message }).toEqual({ result, message: `invalid handler response: ${message}` });
    expect(body.request_id).toBe('bad-out');
    expect(res.headers.injected).toBeUndefined();
  }

  let droppedSeq = 0;
  /**
   * The invalid header is left out with a warning naming why, the rest of the answer is sent (as iii
   * does), and nothing of the bad header reaches the wire.
   */
  async function expectDropped(result: string, message: string): Promise<void> {
    const requestId = `dropped-${++droppedSeq}`;
    const res = await raw(result, { 'x-request-id': requestId });
    expect({ result, status: res.status, text: res.text }).toEqual({ result, status: 200, text: '1' });
    expect(res.headers['x-a']).toBeUndefined();
    expect(res.headers.injected).toBeUndefined();
    const line = await engine.stdout.waitFor((l) => l.includes('invalid response headers dropped') && l.includes(`"${requestId}"`), 10_000);
    expect((JSON.parse(line) as { dropped: string[] }).dropped).toEqual([message]);
  }

  it('answers 502 INVALID_RESPONSE to every status_code that is not an integer 200-599', async () => {
    const statuses = ['0', '99', '100', '101', '199', '600', '1000', '-200', '200.5', '1e400', '"abc"', '"200"', 'true', '[200]', '{}'];
    for (const status of statuses) {
      const res = await raw(`{"status_code":${status},"body":{"a":1}}`);
      const body = expectErrorEnvelope(res, 502, 'INVALID_RESPONSE');
      expect({ status, message: body.error.message }).toEqual({ status, message: STATUS_MESSAGE(status) });
    }
    // Bounds and spellings that are valid.
    for (const [status, code] of [['200', 200], ['599', 599], ['2e2', 200], ['null', 200]] as const) {
      const res = await raw(`{"status_code":${status},"body":{"a":1}}`);
      expect({ status, code: res.status, body: res.json() }).toEqual({ status, code, body: { a: 1 } });
    }
    await keepsServing();
  });

  it('drops header values with CR, LF or other control characters with a warning, and sends the rest (no header injection)', async () => {
    const forbidden = (name: string) => `header ${name} contains forbidden characters (CR, LF or control)`;
    await expectDropped('{"headers":{"X-A":"a\\r\\nInjected: yes"},"body":1}', forbidden('X-A'));
    await expectDropped('{"headers":{"X-A":"a\\nInjected: yes"},"body":1}', forbidden('X-A'));
    await expectDropped('{"headers":{"X-A":"a\\rInjected: yes"},"body":1}', forbidden('X-A'));
    await expectDropped('{"headers":{"X-A":"a\\u0000b"},"body":1}', forbidden('X-A'));
    await expectDropped('{"headers":{"X-A":"a\\u007fb"},"body":1}', forbidden('X-A'));
    await expectDropped('{"headers":{"Set-Cookie":["ok=1","bad=1\\r\\nInjected: yes"]},"body":1}', forbidden('Set-Cookie'));
    await expectDropped('{"headers":["X-A: a\\r\\nInjected: yes"],"body":1}', forbidden('X-A'));
    // Above U+00FF (not a byte), a lone surrogate included.
    await expectDropped('{"headers":{"X-A":"\\u20ac"},"body":1}', forbidden('X-A'));
    await expectDropped('{"headers":{"X-A":"\\ud800"},"body":1}', forbidden('X-A'));
    await keepsServing();
  });

  it('drops header names that are not HTTP tokens with a warning', async () => {
    for (const name of ['X A', '', 'X-A\r\nInjected', 'X(A)', 'X:A', 'Caf\u00e9', '\ud800']) {
      await expectDropped(`{"headers":${JSON.stringify({ [name]: '1' })},"body":1}`, `invalid header name ${JSON.stringify(name)}`);
    }
    await expectDropped('{"headers":["X A: 1"],"body":1}', 'invalid header name "X A"');
    await expectDropped('{"headers":[": empty name"],"body":1}', 'header ": empty name" is not "Name: value"');
    await expectDropped('{"headers":["no colon"],"body":1}', 'header "no colon" is not "Name: value"');
    await keepsServing();
  });

  it('drops headers that are numbers, strings, objects, or hold values that are not text, with a warning', async () => {
    const container = 'headers must be an object or an array of "Name: value" strings';
    await expectDropped('{"headers":5,"body":1}', container);
    await expectDropped('{"headers":"X-A: 1","body":1}', container);
    await expectDropped('{"headers":true,"body":1}', container);
    await expectDropped('{"headers":[["X-A","1"]],"body":1}', 'headers array items must be "Name: value" strings');
    await expectDropped('{"headers":[42],"body":1}', 'headers array items must be "Name: value" strings');
    for (const value of ['{"v":1}', 'null', '[{"v":1}]', '1e400', '-1e400']) {
      await expectDropped(`{"headers":{"X-A":${value}},"body":1}`, 'invalid value for header X-A');
    }
    await keepsServing();
  });

  it('answers 502 INVALID_RESPONSE to results that are not an ApiResponse object', async () => {
    for (const result of ['"ok"', '42', 'true', '[{"status_code":200}]', 'null']) {
      await expectInvalid(result, 'handler result is not an ApiResponse object');
    }
    await keepsServing();
  });

  it('serves numbers beyond a double and lone surrogates as JSON reads them, with no crash', async () => {
    const numbers = await raw('{"headers":{"X-Big":12345678901234567890},"body":{"inf":1e400,"neg":-1e400,"big":123456789012345678901234567890,"tiny":1e-400}}');
    expect(numbers.status).toBe(200);
    expect(numbers.headers['x-big']).toBe('12345678901234567000');
    expect(numbers.text).toBe('{"inf":null,"neg":null,"big":1.2345678901234568e+29,"tiny":0}');

    // In a JSON body, lone surrogates stay escaped (well-formed JSON.stringify) …
    const json = await raw('{"body":{"s":"\\ud800x\\udc00"}}');
    expect(json.status).toBe(200);
    expect(json.text).toBe('{"s":"\\ud800x\\udc00"}');
    // … in a text body, UTF-8 encoding replaces each with U+FFFD, and Content-Length counts the bytes sent.
    const text = await raw('{"headers":{"content-type":"text/plain"},"body":"\\ud800x"}');
    expect(text.status).toBe(200);
    expect(text.text).toBe('\ufffdx');
    expect(text.headers['content-length']).toBe('4');
    await keepsServing();
  });

  it('answers 502 INVALID_RESPONSE to a body too deeply nested to serialise, and serves 1000 levels', async () => {
    const deep = await http(`${engine.httpUrl}/out/deep/100000`, { headers: { 'x-request-id': 'deep-out' } });
    const body = expectErrorEnvelope(deep, 502, 'INVALID_RESPONSE');
    expect(body.error.message).toBe('invalid handler response: body cannot be serialised as JSON: Maximum call stack size exceeded');
    expect(body.request_id).toBe('deep-out');
    const fine = await http(`${engine.httpUrl}/out/deep/1000`);
    expect(fine.status).toBe(200);
    expect(fine.text).toBe(nested(1000));
    await keepsServing();
  });

  it('serves bodies of several MB under max_frame_bytes, as text and as JSON', async () => {
    const bytes = 3 * 1024 * 1024;
    const text = await http(`${engine.httpUrl}/out/big/${bytes}`);
    expect(text.status).toBe(200);
    expect(text.headers['content-length']).toBe(String(bytes));
    expect(text.text.length).toBe(bytes);
    expect(/^x+$/.test(text.text)).toBe(true);

    const items = 150_000; // 150 000 × 19 bytes ≈ 2.7 MiB
    const json = await http(`${engine.httpUrl}/out/big-json/${items}`);
    expect(json.status).toBe(200);
    const array = json.json<string[]>();
    expect(array.length).toBe(items);
    expect(new Set(array)).toEqual(new Set(['0123456789abcdef']));
    await keepsServing();
  });

  /** A worker of its own, for tests that end its connection or send frames the others do not. */
  async function doomedWorker(route: string, answer: (data: any, invocationId: string) => string | Buffer, options: { binary?: boolean } = {}): Promise<RawWorker> {
    const doomed = await RawWorker.connect(engine.workerUrl);
    extraWorkers.push(doomed);
    doomed.route(`doomed::${route}`, 'GET', `/doomed/${route}`);
    serveRaw(doomed, `doomed::${route}`, answer, options);
    await doomed.sync();
    return doomed;
  }

  it('answers 502 WORKER_DISCONNECTED at once when the result frame exceeds max_frame_bytes (the engine closes that worker with 1009)', async () => {
    const doomed = await doomedWorker('huge', () => `{"headers":{"content-type":"text/plain"},"body":"${'x'.repeat(MAX_FRAME_BYTES + 1024)}"}`);
    const started = performance.now();
    const res = await http(`${engine.httpUrl}/doomed/huge`, { headers: { 'x-request-id': 'huge-out' } });
    const body = expectErrorEnvelope(res, 502, 'WORKER_DISCONNECTED');
    expect(body.request_id).toBe('huge-out');
    expect(performance.now() - started).toBeLessThan(TIMEOUT_MS);
    expect((await doomed.closed).code).toBe(1009);
    await keepsServing();
  });

  it('answers 502 WORKER_DISCONNECTED at once to a text frame that is not UTF-8 (the engine closes that worker with 1007)', async () => {
    const doomed = await doomedWorker('utf8', (_data, id) => notUtf8Result('doomed::utf8', id));
    const started = performance.now();
    const res = await http(`${engine.httpUrl}/doomed/utf8`);
    expectErrorEnvelope(res, 502, 'WORKER_DISCONNECTED');
    expect(performance.now() - started).toBeLessThan(TIMEOUT_MS);
    expect((await doomed.closed).code).toBe(1007);
    await keepsServing();
  });

  it('serves invalid UTF-8 in a binary frame with U+FFFD in its place', async () => {
    await doomedWorker('binary', (_data, id) => notUtf8Result('doomed::binary', id), { binary: true });
    const res = await http(`${engine.httpUrl}/doomed/binary`);
    expect(res.status).toBe(200);
    expect(res.json()).toStrictEqual({ s: 'a\ufffd(' });
    await keepsServing();
  });

  it('answers 504 TIMEOUT at the deadline when the worker answers with a frame that is not JSON; the worker stays connected', async () => {
    const started = performance.now();
    const res = await http(`${engine.httpUrl}/out/garbage`, { headers: { 'x-request-id': 'garbage-out' } });
    const elapsed = performance.now() - started;
    const body = expectErrorEnvelope(res, 504, 'TIMEOUT');
    expect(body.request_id).toBe('garbage-out');
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(elapsed).toBeLessThan(TIMEOUT_MS + 1500);
    const warning = await engine.stdout.waitFor((l) => l.includes('malformed worker frame ignored'), 5000, 'malformed-frame warning');
    expect(JSON.parse(warning)).toMatchObject({ code: 'invalid_json' });
    expect(worker.ws.readyState).toBe(WebSocket.OPEN);
    await keepsServing();
  });
});
