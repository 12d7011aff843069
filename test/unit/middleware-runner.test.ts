import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { ApiRequest } from '../../src/http/api-request.js';
import type { InvocationOutcome, InvokeOptions, Invoker } from '../../src/invocation/invoker.js';
import { engineFailure } from '../../src/invocation/invoker.js';
import { toJson } from '../../src/invocation/raw-json.js';
import type { MiddlewareCall } from '../../src/http/middleware-runner.js';
import { MiddlewareRunner } from '../../src/http/middleware-runner.js';

// MiddlewareRunner (docs/middleware.md): one phase, in order, through an Invoker; continue merges
// patches, respond ends the phase, anything else fails it.

type Behaviour = (data: any) => InvocationOutcome | Promise<InvocationOutcome>;

/** An Invoker whose functions are scripted; records what each call received, as the wire would carry it. */
class FakeInvoker implements Invoker {
  readonly calls: { functionId: string; data: any; options: InvokeOptions }[] = [];
  constructor(private readonly functions: Record<string, Behaviour>) {}

  invoke(functionId: string, data: unknown, options: InvokeOptions): Promise<InvocationOutcome> {
    // JSON round trip: the live request is mutated later, and a worker only ever sees JSON.
    const wire = JSON.parse(toJson(data));
    this.calls.push({ functionId, data: wire, options });
    const behaviour = this.functions[functionId];
    if (behaviour === undefined) return Promise.resolve(engineFailure('FUNCTION_UNAVAILABLE', `no worker serves ${functionId}`));
    return Promise.resolve(behaviour(wire));
  }

  fire(): boolean {
    return false;
  }

  has(functionId: string): boolean {
    return Object.hasOwn(this.functions, functionId);
  }

  get invoked(): string[] {
    return this.calls.map((c) => c.functionId);
  }
}

const ok = (value: unknown): InvocationOutcome => ({ ok: true, value });
const proceed = (patch: Record<string, unknown> = {}): Behaviour => () => ok({ action: 'continue', ...patch });
/** Appends `name` to context.trail, reading what earlier middleware accumulated. */
const trail = (name: string): Behaviour => (data) => ok({ action: 'continue', context: { trail: [...(data.context.trail ?? []), name] } });

/** The request's own fields: the engine memoises its JSON under a symbol key, which is not a field. */
const fields = (request: ApiRequest): Record<string, unknown> => Object.fromEntries(Object.entries(request));

function makeRequest(overrides: Partial<ApiRequest> = {}): ApiRequest {
  const headers = Object.create(null) as Record<string, string>;
  headers.host = 'example';
  headers['x-request-id'] = 'rid-1';
  return {
    path: '/api/items/7',
    method: 'GET',
    path_params: Object.assign(Object.create(null) as Record<string, string>, { id: '7' }),
    query_params: Object.assign(Object.create(null) as Record<string, string>, { q: 'x' }),
    body: null,
    headers,
    trigger: { type: 'http', path: '/api/items/:id', method: 'GET' },
    context: {},
    request_id: 'rid-1',
    ip: '127.0.0.1',
    ...overrides,
  };
}

const silent = pino({ level: 'silent' });

function capturingLogger(): { logger: pino.Logger; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk.toString('utf8'));
      callback();
    },
  });
  const logger = pino({ level: 'debug' }, destination);
  const lines = () =>
    chunks
      .join('')
      .split('\n')
      .filter((l) => l.length > 0)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { logger, lines };
}

const DEADLINE = 123_456.5;

async function runOne(
  functions: Record<string, Behaviour>,
  order: string[],
  call: Partial<MiddlewareCall> = {},
  logger: pino.Logger = silent,
) {
  const invoker = new FakeInvoker(functions);
  const runner = new MiddlewareRunner(invoker, logger);
  const request = call.request ?? makeRequest();
  const outcome = await runner.run(order, { phase: 'preHandler', ...call, request }, DEADLINE, 'rid-1');
  return { outcome, invoker, request };
}

describe('MiddlewareRunner: continue', () => {
  it('runs every middleware in the given order and continues', async () => {
    const { outcome, invoker, request } = await runOne({ a: trail('a'), b: trail('b'), c: trail('c') }, ['b', 'a', 'c']);
    expect(outcome).toEqual({ kind: 'continue' });
    expect(invoker.invoked).toEqual(['b', 'a', 'c']);
    expect(request.context).toEqual({ trail: ['b', 'a', 'c'] });
  });

  it('passes the accumulated context (and the patched request) to each next middleware', async () => {
    const { invoker } = await runOne(
      {
        a: proceed({ context: { user: { id: 7 } }, request: { headers: { 'x-user': '7' } } }),
        b: proceed({ context: { user: { name: 'ann' }, roles: ['r1'] } }),
        c: proceed(),
      },
      ['a', 'b', 'c'],
    );
    expect(invoker.calls[0]?.data.context).toEqual({});
    expect(invoker.calls[1]?.data.context).toEqual({ user: { id: 7 } });
    expect(invoker.calls[1]?.data.request.headers['x-user']).toBe('7');
    expect(invoker.calls[2]?.data.context).toEqual({ user: { id: 7, name: 'ann' }, roles: ['r1'] });
    // `context` and `request.context` are the same accumulated object.
    expect(invoker.calls[2]?.data.request.context).toEqual(invoker.calls[2]?.data.context);
  });

  it('sends exactly phase, request and context, plus matched_route / response / error only when given', async () => {
    const request = makeRequest();
    const bare = await runOne({ m: proceed() }, ['m'], { phase: 'onRequest', request });
    expect(bare.invoker.calls[0]?.data).toStrictEqual({ phase: 'onRequest', request: JSON.parse(JSON.stringify(request)), context: {} });

    const matchedRoute = { function_id: 'api::item', path_pattern: '/api/items/:id' };
    const full = await runOne({ m: proceed() }, ['m'], {
      phase: 'postHandler',
      matchedRoute,
      response: { status_code: 201, body: { a: 1 } },
    });
    expect(Object.keys(full.invoker.calls[0]?.data).sort()).toEqual(['context', 'matched_route', 'phase', 'request', 'response']);
    expect(full.invoker.calls[0]?.data.matched_route).toStrictEqual(matchedRoute);
    expect(full.invoker.calls[0]?.data.response).toStrictEqual({ status_code: 201, body: { a: 1 } });

    const error = await runOne({ m: proceed() }, ['m'], { phase: 'onError', matchedRoute, error: { code: 'invocation_failed', message: 'boom' } });
    expect(Object.keys(error.invoker.calls[0]?.data).sort()).toEqual(['context', 'error', 'matched_route', 'phase', 'request']);
    expect(error.invoker.calls[0]?.data.error).toStrictEqual({ code: 'invocation_failed', message: 'boom' });
    expect(error.invoker.calls[0]?.data.phase).toBe('onError');
  });

  it('hands the deadline and request id to the invoker', async () => {
    const { invoker } = await runOne({ a: proceed(), b: proceed() }, ['a', 'b']);
    for (const call of invoker.calls) expect(call.options).toStrictEqual({ deadline: DEADLINE, requestId: 'rid-1' });
  });

  it('continues at once, without invoking anything, for an empty list', async () => {
    const { outcome, invoker } = await runOne({}, []);
    expect(outcome).toEqual({ kind: 'continue' });
    expect(invoker.calls).toEqual([]);
  });

  it('treats null request/context patches as absent', async () => {
    const { outcome, request } = await runOne({ a: proceed({ request: null, context: null }) }, ['a']);
    expect(outcome).toEqual({ kind: 'continue' });
    expect(fields(request)).toEqual(makeRequest());
  });
});

describe('MiddlewareRunner: request patches', () => {
  it('deep-merges headers, query_params, path_params and body; arrays and scalars replace', async () => {
    const request = makeRequest({ body: { keep: 1, list: [1, 2], nested: { a: 1 } } });
    const { outcome } = await runOne(
      {
        a: proceed({
          request: {
            headers: { 'x-user': 'ann' },
            query_params: { page: '2' },
            path_params: { id: '8' },
            body: { list: [9], nested: { b: 2 } },
          },
        }),
      },
      ['a'],
      { request },
    );
    expect(outcome).toEqual({ kind: 'continue' });
    expect({ ...request.headers }).toEqual({ host: 'example', 'x-request-id': 'rid-1', 'x-user': 'ann' });
    expect({ ...request.query_params }).toEqual({ q: 'x', page: '2' });
    expect({ ...request.path_params }).toEqual({ id: '8' });
    expect(request.body).toEqual({ keep: 1, list: [9], nested: { a: 1, b: 2 } });
  });

  it('replaces a scalar body with a patched one', async () => {
    const request = makeRequest({ body: 'text' });
    await runOne({ a: proceed({ request: { body: { now: 'json' } } }) }, ['a'], { request });
    expect(request.body).toEqual({ now: 'json' });
  });

  it('ignores request keys the engine owns (request_id, ip, trigger, context) and unknown keys', async () => {
    const request = makeRequest();
    const { outcome } = await runOne(
      {
        a: proceed({
          request: {
            request_id: 'forged',
            ip: '10.0.0.1',
            trigger: { type: 'http', path: '/forged', method: 'POST' },
            context: { admin: true },
            extra: 1,
            headers: { 'x-ok': '1' },
          },
        }),
      },
      ['a'],
      { request },
    );
    expect(outcome).toEqual({ kind: 'continue' });
    expect(request.request_id).toBe('rid-1');
    expect(request.ip).toBe('127.0.0.1');
    expect(request.trigger).toEqual({ type: 'http', path: '/api/items/:id', method: 'GET' });
    expect(request.context).toEqual({});
    expect(Object.hasOwn(request, 'extra')).toBe(false);
    expect(request.headers['x-ok']).toBe('1');
  });

  it('changes path and method, upper-casing the method', async () => {
    const request = makeRequest();
    const { outcome } = await runOne({ a: proceed({ request: { path: '/v2/items/7', method: 'delete' } }) }, ['a'], { phase: 'onRequest', request });
    expect(outcome).toEqual({ kind: 'continue' });
    expect(request.path).toBe('/v2/items/7');
    expect(request.method).toBe('DELETE');
  });

  it('accepts any HTTP token as a method', async () => {
    const request = makeRequest();
    await runOne({ a: proceed({ request: { method: 'purge' } }) }, ['a'], { request });
    expect(request.method).toBe('PURGE');
  });

  const badPatches: [string, Record<string, unknown>, string][] = [
    ['relative path', { path: 'relative' }, 'request.path patch must be an absolute path without query or fragment'],
    ['path with query', { path: '/a?x=1' }, 'request.path patch must be an absolute path without query or fragment'],
    ['path with fragment', { path: '/a#top' }, 'request.path patch must be an absolute path without query or fragment'],
    ['numeric path', { path: 42 }, 'request.path patch must be an absolute path without query or fragment'],
    ['path as object', { path: { p: '/x' } }, 'request.path patch must be an absolute path without query or fragment'],
    ['method with a space', { method: 'GE T' }, 'request.method patch must be an HTTP method'],
    ['empty method', { method: '' }, 'request.method patch must be an HTTP method'],
    ['numeric method', { method: 5 }, 'request.method patch must be an HTTP method'],
    ['headers as null', { headers: null }, 'request.headers patch must keep headers an object'],
    ['headers as string', { headers: 'x' }, 'request.headers patch must keep headers an object'],
    ['headers as array', { headers: ['a: b'] }, 'request.headers patch must keep headers an object'],
    ['good headers with a bad path', { headers: { 'x-a': '1' }, body: { b: 1 }, path: 7 }, 'request.path patch must be an absolute path without query or fragment'],
    ['good path with a bad method', { path: '/ok', method: 'A B' }, 'request.method patch must be an HTTP method'],
  ];
  for (const [name, patch, reason] of badPatches) {
    it(`fails the phase on a bad request patch, leaving the request untouched: ${name}`, async () => {
      const { outcome, invoker, request } = await runOne({ a: proceed({ request: patch, context: { c: 1 } }), b: proceed() }, ['a', 'b']);
      expect(outcome).toStrictEqual({ kind: 'failed', functionId: 'a', reason, timedOut: false });
      expect(invoker.invoked).toEqual(['a']);
      // Later phases (onError, onTimeout, onResponse) still use this request: it must stay well-formed.
      expect(fields(request)).toStrictEqual(makeRequest());
    });
  }

  it('fails the phase when a patch nests deeper than 32 levels', async () => {
    let deep: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 40; i++) deep = { d: deep };
    for (const patch of [{ context: deep }, { request: { body: deep } }]) {
      const { outcome, invoker } = await runOne({ a: proceed(patch), b: proceed() }, ['a', 'b']);
      expect(outcome).toStrictEqual({ kind: 'failed', functionId: 'a', reason: 'patch nested deeper than 32', timedOut: false });
      expect(invoker.invoked).toEqual(['a']);
    }
  });
});

describe('MiddlewareRunner: respond', () => {
  it('ends the phase with the response; later middleware do not run', async () => {
    const response = { status_code: 401, body: { error: 'no' }, headers: { 'www-authenticate': 'Bearer' } };
    const { outcome, invoker, request } = await runOne(
      { a: trail('a'), b: () => ok({ action: 'respond', response }), c: trail('c') },
      ['a', 'b', 'c'],
    );
    expect(outcome).toStrictEqual({ kind: 'respond', response, functionId: 'b' });
    expect(invoker.invoked).toEqual(['a', 'b']);
    expect(request.context).toEqual({ trail: ['a'] });
  });

  it('ignores continue-style patches on a respond', async () => {
    const request = makeRequest();
    const { outcome } = await runOne(
      { a: () => ok({ action: 'respond', response: { status_code: 200 }, context: { x: 1 }, request: { path: '/x' } }) },
      ['a'],
      { request },
    );
    expect(outcome).toStrictEqual({ kind: 'respond', response: { status_code: 200 }, functionId: 'a' });
    expect(request.context).toEqual({});
    expect(request.path).toBe('/api/items/7');
  });
});

describe('MiddlewareRunner: failures', () => {
  it('fails with the invoker\'s answer when no connected worker serves the function, and runs nothing after it', async () => {
    // The call goes through the invoker even then: only it knows whether a departed worker is
    // awaited (the reconnect grace waits for it) or nobody serves the function (it fails at once).
    const { outcome, invoker } = await runOne({ a: trail('a'), c: trail('c') }, ['a', 'missing', 'c']);
    expect(outcome).toStrictEqual({
      kind: 'failed',
      functionId: 'missing',
      reason: 'FUNCTION_UNAVAILABLE: no worker serves missing',
      timedOut: false,
    });
    expect(invoker.invoked).toEqual(['a', 'missing']);
  });

  it('fails on a worker error, with the worker code in the reason', async () => {
    const { outcome, invoker } = await runOne(
      { a: () => ({ ok: false, failure: { source: 'worker', code: 'invocation_failed', message: 'boom' } }), b: proceed() },
      ['a', 'b'],
    );
    expect(outcome).toStrictEqual({
      kind: 'failed',
      functionId: 'a',
      reason: 'invocation_failed: boom',
      timedOut: false,
      failure: { source: 'worker', code: 'invocation_failed', message: 'boom' },
    });
    expect(invoker.invoked).toEqual(['a']);
  });

  it('marks an engine TIMEOUT as timed out, and nothing else', async () => {
    const timeout = await runOne({ a: () => engineFailure('TIMEOUT', 'deadline passed'), b: proceed() }, ['a', 'b']);
    expect(timeout.outcome).toStrictEqual({ kind: 'failed', functionId: 'a', reason: 'TIMEOUT: deadline passed', timedOut: true });
    expect(timeout.invoker.invoked).toEqual(['a']);

    const disconnected = await runOne({ a: () => engineFailure('WORKER_DISCONNECTED', 'gone') }, ['a']);
    expect(disconnected.outcome).toStrictEqual({ kind: 'failed', functionId: 'a', reason: 'WORKER_DISCONNECTED: gone', timedOut: false });

    const unavailable = await runOne({ a: () => engineFailure('FUNCTION_UNAVAILABLE', 'none') }, ['a']);
    expect(unavailable.outcome).toMatchObject({ kind: 'failed', timedOut: false });

    // A worker that happens to use the code TIMEOUT is a worker error, not the deadline.
    const workerCode = await runOne({ a: () => ({ ok: false, failure: { source: 'worker', code: 'TIMEOUT', message: 'mine' } }) }, ['a']);
    expect(workerCode.outcome).toMatchObject({ kind: 'failed', functionId: 'a', reason: 'TIMEOUT: mine', timedOut: false });
  });

  const malformed: [string, unknown, string][] = [
    ['a string', 'continue', 'middleware returned no result object'],
    ['an array', [{ action: 'continue' }], 'middleware returned no result object'],
    ['true', true, 'middleware returned no result object'],
    ['no action', { context: {} }, 'action must be "continue" or "respond", got nothing'],
    ['unknown action', { action: 'skip' }, 'action must be "continue" or "respond", got "skip"'],
    ['action in another case', { action: 'Continue' }, 'action must be "continue" or "respond", got "Continue"'],
    ['respond without response', { action: 'respond' }, 'respond needs a response object'],
    ['respond with a string response', { action: 'respond', response: 'hi' }, 'respond needs a response object'],
    ['respond with an array response', { action: 'respond', response: [] }, 'respond needs a response object'],
    ['continue with request as string', { action: 'continue', request: 'x' }, 'continue.request must be an object'],
    ['continue with request as array', { action: 'continue', request: [] }, 'continue.request must be an object'],
    ['continue with context as array', { action: 'continue', context: [1] }, 'continue.context must be an object'],
    ['continue with context as number', { action: 'continue', context: 3 }, 'continue.context must be an object'],
  ];
  for (const value of [undefined, null]) {
    it(`continues past a middleware that returns ${String(value)}, as iii does`, async () => {
      const { outcome, invoker, request } = await runOne({ a: () => ok(value), b: proceed({ context: { b: 1 } }) }, ['a', 'b']);
      expect(outcome).toStrictEqual({ kind: 'continue' });
      expect(invoker.invoked).toEqual(['a', 'b']);
      expect(request.context).toEqual({ b: 1 });
    });
  }

  for (const [name, value, reason] of malformed) {
    it(`fails on a malformed result: ${name}`, async () => {
      const { outcome, invoker, request } = await runOne({ a: () => ok(value), b: proceed({ context: { b: 1 } }) }, ['a', 'b']);
      expect(outcome).toStrictEqual({ kind: 'failed', functionId: 'a', reason, timedOut: false });
      expect(invoker.invoked).toEqual(['a']);
      expect(request.context).toEqual({});
    });
  }
});

describe('MiddlewareRunner: refused keys', () => {
  const pollution = JSON.parse(
    '{"action":"continue",' +
      '"context":{"__proto__":{"polluted":"yes"},"nested":{"constructor":{"prototype":{"polluted":"yes"}},"ok":1}},' +
      '"request":{"headers":{"__proto__":{"polluted":"yes"},"x-safe":"1"},"__proto__":{"path":"/evil"}}}',
  ) as unknown;

  it('drops them, logs one warning with the count, and continues', async () => {
    const { logger, lines } = capturingLogger();
    const request = makeRequest();
    const { outcome, invoker } = await runOne({ a: () => ok(pollution), b: proceed() }, ['a', 'b'], { request }, logger);
    expect(outcome).toEqual({ kind: 'continue' });
    expect(invoker.invoked).toEqual(['a', 'b']);
    expect(request.context).toStrictEqual({ nested: { ok: 1 } });
    expect(request.headers['x-safe']).toBe('1');
    expect(Object.hasOwn(request.headers, '__proto__')).toBe(false);
    expect(request.path).toBe('/api/items/7');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(request.context)).toBe(Object.prototype);

    const warnings = lines().filter((l) => l.msg === 'middleware patch keys __proto__/constructor/prototype refused');
    expect(warnings).toHaveLength(1);
    // context: __proto__ + constructor; request.headers: __proto__. The request's own top-level
    // `__proto__` is not a patchable request key, so it is dropped before merging, uncounted.
    expect(warnings[0]).toMatchObject({ level: 40, functionId: 'a', requestId: 'rid-1', refusedKeys: 3 });
  });

  it('logs nothing when no key was refused', async () => {
    const { logger, lines } = capturingLogger();
    await runOne({ a: proceed({ context: { user: 1 }, request: { headers: { 'x-a': '1' } } }) }, ['a'], {}, logger);
    expect(lines()).toEqual([]);
  });
});
