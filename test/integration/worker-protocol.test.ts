import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { once } from 'node:events';
import type { InProcessEngine } from '../support/in-process.js';
import { QUICK_GRACE_MS, startWorker } from '../support/processes.js';
import { startInProcessEngine } from '../support/in-process.js';
import { http, waitForStatus } from '../support/http.js';
import { RawWorker, UUID_V4 } from '../support/raw-worker.js';

const MAX_FRAME_BYTES = 64 * 1024;

describe('worker protocol (raw ws client)', () => {
  let engine: InProcessEngine;
  const sockets: RawWorker[] = [];
  const connect = async (headers?: Record<string, string>) => {
    const w = await RawWorker.connect(engine.workerUrl, headers);
    sockets.push(w);
    return w;
  };

  beforeAll(async () => {
    engine = await startInProcessEngine({ workers: { max_frame_bytes: MAX_FRAME_BYTES, reconnect_grace_ms: QUICK_GRACE_MS }, api: { default_timeout: 20_000 } });
  });
  afterAll(async () => {
    await Promise.all(sockets.map((s) => s.close()));
    await engine?.stop();
  });

  it('sends workerregistered with uuid worker_id and reattach_token first', async () => {
    const w = await connect();
    const first = await w.ofType('workerregistered');
    expect(first.worker_id).toMatch(UUID_V4);
    expect(first.reattach_token).toMatch(UUID_V4);
    expect(first.reattach_token).not.toBe(first.worker_id);
  });

  it('answers a JSON ping with a pong and a WebSocket ping with a pong frame', async () => {
    const w = await connect();
    w.send({ type: 'ping' });
    expect(await w.ofType('pong')).toEqual({ type: 'pong' });
    const pong = once(w.ws, 'pong');
    w.ws.ping(Buffer.from('hi'));
    const [payload] = await pong;
    expect(String(payload)).toBe('hi');
  });

  it('refuses invalid triggers with a triggerregistrationresult error', async () => {
    const w = await connect();
    // A type no worker provides (yet) is parked without an answer, as iii does: the next result is
    // the first bad http trigger's.
    w.send({ type: 'registertrigger', id: 'parked', trigger_type: 'queue', function_id: 'f::x', config: { topic: 'x' } });
    const cases: [string, Record<string, unknown>, string][] = [
      ['http', { http_method: 'GET' }, 'invalid_trigger_config'],
      ['http', { api_path: '/x', http_method: 7 }, 'invalid_trigger_config'],
      ['http', { api_path: 'query?in-path', http_method: 'GET' }, 'invalid_trigger_config'],
      ['http', { api_path: '/x', http_method: 'GE T' }, 'invalid_trigger_config'],
      ['http_middleware', { phase: 'sometimes' }, 'invalid_trigger_config'],
      ['http_middleware', { phase: 'onRequest', priority: 'high' }, 'invalid_trigger_config'],
      ['http_middleware', { phase: 'onRequest', scope: { path: 7 } }, 'invalid_trigger_config'],
    ];
    for (const [index, [triggerType, config, code]] of cases.entries()) {
      w.send({ type: 'registertrigger', id: `bad-${index}`, trigger_type: triggerType, function_id: 'f::x', config });
      const result = await w.next((f) => f.type === 'triggerregistrationresult');
      expect(result.id).toBe(`bad-${index}`);
      expect(result).toMatchObject({ trigger_type: triggerType, function_id: 'f::x', error: { code } });
      expect(typeof result.error.message).toBe('string');
    }
  });

  it('accepts http_middleware, registerservice, registertriggertype and engine::workers::register without error', async () => {
    const w = await connect();
    w.send({ type: 'registertrigger', id: 'mw-1', trigger_type: 'http_middleware', function_id: 'mw::a', config: { phase: 'preHandler', scope: { path: '/api/*' }, priority: 10 } });
    w.send({ type: 'registerservice', id: 'svc', name: 'service' });
    w.send({ type: 'registertriggertype', id: 'custom', description: 'mine' });
    w.send({ type: 'invokefunction', function_id: 'engine::workers::register', data: { runtime: 'node', name: 'raw' }, action: { type: 'void' } });
    await w.sync();
    expect(w.frames.filter((f) => f.type === 'triggerregistrationresult')).toEqual([]);
  });

  it('logs and ignores malformed frames and unknown types, and keeps the connection', async () => {
    const w = await connect();
    w.send('{not json');
    w.send('[1,2,3]');
    w.send({ no_type: true });
    w.send({ type: 'registertrigger', id: 'x' });
    w.send({ type: 'somethingnew', payload: 1 });
    w.send({ type: 'invocationresult', invocation_id: '00000000-0000-4000-8000-000000000000', function_id: 'f', result: 1 });
    w.send({ type: 'ping' });
    await w.ofType('pong');
    await engine.stdout.waitFor((l) => l.includes('malformed worker frame ignored'));
  });

  it('accepts a binary frame holding JSON', async () => {
    const w = await connect();
    w.ws.send(Buffer.from(JSON.stringify({ type: 'ping' })), { binary: true });
    await w.ofType('pong');
  });

  it('refuses a frame above max_frame_bytes by closing with 1009', async () => {
    const w = await connect();
    w.send({ type: 'registerfunction', id: 'big', description: 'x'.repeat(MAX_FRAME_BYTES + 10) });
    const closed = await w.closed;
    expect(closed.code).toBe(1009);
  });

  it('settles a pending request at once when its worker disconnects (502 WORKER_DISCONNECTED)', async () => {
    const w = await connect();
    w.route('raw::hang', 'GET', '/raw/hang');
    await w.sync();
    const started = Date.now();
    const pending = http(`${engine.httpUrl}/raw/hang`);
    await w.ofType('invokefunction');
    w.ws.terminate();
    const res = await pending;
    expect(res.status).toBe(502);
    expect(res.json().error.code).toBe('WORKER_DISCONNECTED');
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('removes only what the closing connection registered (a reconnected worker survives)', async () => {
    const oldConn = await connect();
    oldConn.route('raw::same', 'GET', '/raw/same');
    oldConn.serve('raw::same', () => ({ status_code: 200, body: { from: 'old' } }));
    await waitForStatus(`${engine.httpUrl}/raw/same`, (s) => s === 200);
    const newConn = await connect();
    newConn.route('raw::same', 'GET', '/raw/same');
    newConn.serve('raw::same', () => ({ status_code: 200, body: { from: 'new' } }));
    await oldConn.close();
    const res = await waitForStatus(`${engine.httpUrl}/raw/same`, (s) => s === 200);
    expect(res.json()).toEqual({ from: 'new' });
    for (let i = 0; i < 5; i++) expect((await http(`${engine.httpUrl}/raw/same`)).json()).toEqual({ from: 'new' });
  });

  it('routes disappear when the last worker goes away', async () => {
    const w = await connect();
    w.route('raw::gone', 'GET', '/raw/gone');
    w.serve('raw::gone', () => ({ status_code: 200, body: 'ok' }));
    await waitForStatus(`${engine.httpUrl}/raw/gone`, (s) => s === 200);
    await w.close();
    const res = await waitForStatus(`${engine.httpUrl}/raw/gone`, (s) => s === 404);
    expect(res.json().error.code).toBe('NOT_FOUND');
  });

  it('relays invocations between workers, with results, errors and fire-and-forget', async () => {
    const callee = await connect();
    callee.send({ type: 'registerfunction', id: 'raw::callee' });
    const caller = await connect();
    const callerId = (await caller.ofType('workerregistered')).worker_id as string;
    await callee.sync();

    caller.send({ type: 'invokefunction', invocation_id: 'a1b2c3d4-0000-4000-8000-000000000001', function_id: 'raw::callee', data: { n: 1 } });
    const call = await callee.ofType('invokefunction');
    expect(call.function_id).toBe('raw::callee');
    // As iii: an object payload names the calling worker.
    expect(call.data).toEqual({ n: 1, _caller_worker_id: callerId });
    expect(call.invocation_id).toMatch(UUID_V4);
    callee.send({ type: 'invocationresult', invocation_id: call.invocation_id, function_id: 'raw::callee', result: { n: 2 } });
    const result = await caller.ofType('invocationresult');
    expect(result).toMatchObject({ invocation_id: 'a1b2c3d4-0000-4000-8000-000000000001', function_id: 'raw::callee', result: { n: 2 } });

    caller.send({ type: 'invokefunction', invocation_id: 'a1b2c3d4-0000-4000-8000-000000000002', function_id: 'raw::callee', data: {} });
    const call2 = await callee.ofType('invokefunction');
    callee.send({ type: 'invocationresult', invocation_id: call2.invocation_id, function_id: 'raw::callee', error: { code: 'invocation_failed', message: 'nope' } });
    expect((await caller.ofType('invocationresult')).error).toEqual({ code: 'invocation_failed', message: 'nope' });

    caller.send({ type: 'invokefunction', invocation_id: 'a1b2c3d4-0000-4000-8000-000000000003', function_id: 'raw::missing', data: {} });
    expect((await caller.ofType('invocationresult')).error.code).toBe('function_not_found');

    caller.send({ type: 'invokefunction', function_id: 'raw::callee', data: { fire: true }, action: { type: 'void' } });
    const fired = await callee.ofType('invokefunction');
    expect(fired.data).toEqual({ fire: true, _caller_worker_id: callerId });
    expect(fired.invocation_id).toBeUndefined();
  });

  it('retires the previous connection on reattach with the right token, not with a wrong one', async () => {
    const first = await connect();
    const registered = await first.ofType('workerregistered');
    first.route('raw::reattach', 'GET', '/raw/reattach');
    first.serve('raw::reattach', () => ({ status_code: 200, body: 'first' }));
    await waitForStatus(`${engine.httpUrl}/raw/reattach`, (s) => s === 200);

    const impostor = await connect();
    impostor.send({ type: 'reattach', previous_worker_id: registered.worker_id, reattach_token: 'wrong' });
    impostor.send({ type: 'ping' });
    await impostor.ofType('pong');
    expect((await http(`${engine.httpUrl}/raw/reattach`)).text).toBe('"first"');

    const second = await connect();
    second.send({ type: 'reattach', previous_worker_id: registered.worker_id, reattach_token: registered.reattach_token });
    await first.closed;
    await waitForStatus(`${engine.httpUrl}/raw/reattach`, (s) => s === 404);
  });

  it('accepts the SDK telemetry socket on /otel and refuses other paths', async () => {
    const otel = new WebSocket(`${engine.workerUrl}/otel`);
    await once(otel, 'open');
    otel.send(Buffer.from('OTLP...'));
    otel.close();
    const other = new WebSocket(`${engine.workerUrl}/elsewhere`);
    const [err] = (await once(other, 'error')) as [Error];
    expect(err.message).toContain('404');
  });
});

describe('worker token', () => {
  let engine: InProcessEngine;
  beforeAll(async () => {
    engine = await startInProcessEngine({ workers: { auth_token: 's3cret' } });
  });
  afterAll(async () => {
    await engine?.stop();
  });

  it('closes a worker without the token with 4401 and a clear reason', async () => {
    const w = await RawWorker.connect(engine.workerUrl);
    const closed = await w.closed;
    expect(closed.code).toBe(4401);
    expect(closed.reason).toContain('token');
    expect(w.frames.find((f) => f.type === 'workerregistered')).toBeUndefined();
  });

  it('accepts a worker presenting the token', async () => {
    const w = await RawWorker.connect(engine.workerUrl, { authorization: 'Bearer s3cret' });
    expect((await w.ofType('workerregistered')).worker_id).toMatch(UUID_V4);
    await w.close();
  });
});

describe('older iii-sdk clients', () => {
  let engine: InProcessEngine;
  beforeAll(async () => {
    engine = await startInProcessEngine();
  });
  afterAll(async () => {
    await engine?.stop();
  });

  it.each([
    ['sdk-0-9-worker', '/v09/hello/ann', '0.9'],
    ['sdk-0-11-worker', '/v011/hello/ann', '0.11'],
  ])('%s serves its route', async (fixture, path, sdk) => {
    const worker = startWorker(fixture, engine.workerUrl);
    try {
      const res = await waitForStatus(`${engine.httpUrl}${path}`, (s) => s === 200);
      expect(res.json()).toEqual({ sdk, name: 'ann' });
    } finally {
      await worker.stop();
    }
  });
});
