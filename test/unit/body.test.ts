import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { BodyReadResult } from '../../src/http/body.js';
import { decodeBody, hasBody, MAX_JSON_DEPTH, readBody, searchParamsToObject } from '../../src/http/body.js';
import { inheritsNothing } from '../../src/values.js';

interface FakeRequest {
  req: IncomingMessage;
  stream: Readable;
  read: ReturnType<typeof vi.fn>;
}

/** A Readable standing in for IncomingMessage: chunks pushed by the test, headers as given. */
function fakeRequest(headers: IncomingHttpHeaders, chunks: (Buffer | string)[] = [], end = true): FakeRequest {
  const read = vi.fn();
  const stream = new Readable({ read });
  for (const chunk of chunks) stream.push(chunk);
  if (end) stream.push(null);
  const req = Object.assign(stream, { headers }) as unknown as IncomingMessage;
  return { req, stream, read };
}

const okBytes = (text: string): BodyReadResult => ({ ok: true, bytes: Buffer.from(text) });

afterEach(() => {
  vi.useRealTimers();
});

describe('hasBody', () => {
  it('looks at Content-Length and Transfer-Encoding', () => {
    expect(hasBody(fakeRequest({}).req)).toBe(false);
    expect(hasBody(fakeRequest({ 'content-length': '0' }).req)).toBe(false);
    expect(hasBody(fakeRequest({ 'content-length': '5' }).req)).toBe(true);
    expect(hasBody(fakeRequest({ 'transfer-encoding': 'chunked' }).req)).toBe(true);
  });
});

describe('readBody', () => {
  it('returns an empty buffer without reading when there is no body', async () => {
    const { req, read, stream } = fakeRequest({}, [], false);
    const result = await readBody(req, 10, 1000);
    expect(result).toStrictEqual({ ok: true, bytes: Buffer.alloc(0) });
    expect(read).not.toHaveBeenCalled();
    expect(stream.listenerCount('data')).toBe(0);
  });

  it('returns an empty buffer for Content-Length: 0', async () => {
    const { req, read } = fakeRequest({ 'content-length': '0' }, [], false);
    expect(await readBody(req, 10, 1000)).toStrictEqual({ ok: true, bytes: Buffer.alloc(0) });
    expect(read).not.toHaveBeenCalled();
  });

  it('reads a body in one chunk and in several', async () => {
    const single = fakeRequest({ 'content-length': '5' }, ['hello']);
    expect(await readBody(single.req, 100, 1000)).toStrictEqual(okBytes('hello'));

    const several = fakeRequest({ 'transfer-encoding': 'chunked' }, ['he', Buffer.from('ll'), 'o!']);
    expect(await readBody(several.req, 100, 1000)).toStrictEqual(okBytes('hello!'));
  });

  it('accepts a body of exactly the limit', async () => {
    const { req } = fakeRequest({ 'content-length': '10' }, ['0123456789']);
    expect(await readBody(req, 10, 1000)).toStrictEqual(okBytes('0123456789'));
  });

  it('rejects a declared Content-Length over the limit without reading', async () => {
    const { req, read, stream } = fakeRequest({ 'content-length': '11' }, [], false);
    expect(await readBody(req, 10, 1000)).toStrictEqual({ ok: false, code: 'PAYLOAD_TOO_LARGE' });
    expect(read).not.toHaveBeenCalled();
    expect(stream.readableFlowing).toBeNull();
    expect(stream.listenerCount('data')).toBe(0);
  });

  it('rejects a streamed body over the limit, stops listening and pauses the stream', async () => {
    const { req, stream } = fakeRequest({ 'transfer-encoding': 'chunked' }, ['12345', '67890', 'X'], false);
    expect(await readBody(req, 10, 1000)).toStrictEqual({ ok: false, code: 'PAYLOAD_TOO_LARGE' });
    expect(stream.listenerCount('data')).toBe(0);
    expect(stream.listenerCount('end')).toBe(0);
    expect(stream.isPaused()).toBe(true);
  });

  it('rejects a body that exceeds the limit despite a small declared length', async () => {
    const { req } = fakeRequest({ 'content-length': '3' }, ['0123456789AB']);
    expect(await readBody(req, 10, 1000)).toStrictEqual({ ok: false, code: 'PAYLOAD_TOO_LARGE' });
  });

  it('times out when the body does not arrive in time', async () => {
    vi.useFakeTimers();
    const { req, stream } = fakeRequest({ 'content-length': '10' }, ['12345'], false);
    let settled: BodyReadResult | undefined;
    const reading = readBody(req, 100, 50).then((result) => {
      settled = result;
      return result;
    });
    await vi.advanceTimersByTimeAsync(49);
    expect(settled).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(await reading).toStrictEqual({ ok: false, code: 'REQUEST_TIMEOUT' });
    expect(stream.listenerCount('data')).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('times out at once for a deadline already passed', async () => {
    vi.useFakeTimers();
    const { req } = fakeRequest({ 'transfer-encoding': 'chunked' }, [], false);
    const reading = readBody(req, 100, -5);
    await vi.advanceTimersByTimeAsync(0);
    expect(await reading).toStrictEqual({ ok: false, code: 'REQUEST_TIMEOUT' });
  });

  it('clears its timer once the body has been read', async () => {
    vi.useFakeTimers();
    const { req } = fakeRequest({ 'content-length': '2' }, ['ok']);
    const reading = readBody(req, 100, 1000);
    await vi.advanceTimersByTimeAsync(0);
    expect(await reading).toStrictEqual(okBytes('ok'));
    expect(vi.getTimerCount()).toBe(0);
  });

  it('reports an aborted request or a stream error as ABORTED', async () => {
    const aborted = fakeRequest({ 'content-length': '10' }, [], false);
    const first = readBody(aborted.req, 100, 1000);
    aborted.stream.emit('aborted');
    expect(await first).toStrictEqual({ ok: false, code: 'ABORTED' });

    const failed = fakeRequest({ 'content-length': '10' }, [], false);
    const second = readBody(failed.req, 100, 1000);
    failed.stream.destroy(new Error('socket hang up'));
    expect(await second).toStrictEqual({ ok: false, code: 'ABORTED' });
  });
});

describe('decodeBody', () => {
  const bytes = (text: string): Buffer => Buffer.from(text, 'utf8');

  it('decodes an empty body to null whatever the content type', () => {
    for (const type of [undefined, 'application/json', 'text/plain', 'application/x-www-form-urlencoded', 'image/png']) {
      expect(decodeBody(Buffer.alloc(0), type)).toStrictEqual({ ok: true, body: null });
    }
  });

  it('parses application/json, with parameters and in any case', () => {
    // Valid JSON comes back as its own text, the parsed value is not kept (apiRequestWithJsonBody parses on read).
    expect(decodeBody(bytes('{"a":1,"b":[true,null]}'), 'application/json')).toStrictEqual({ ok: true, json: bytes('{"a":1,"b":[true,null]}') });
    expect(decodeBody(bytes('[1]'), 'application/json; charset=utf-8')).toStrictEqual({ ok: true, json: bytes('[1]') });
    expect(decodeBody(bytes(' "x" '), ' Application/JSON ')).toStrictEqual({ ok: true, json: bytes(' "x" ') });
    expect(decodeBody(bytes('null'), 'application/json')).toStrictEqual({ ok: true, json: bytes('null') });
  });

  it('parses +json media types', () => {
    expect(decodeBody(bytes('{"title":"x"}'), 'application/problem+json')).toStrictEqual({ ok: true, json: bytes('{"title":"x"}') });
    expect(decodeBody(bytes('{"data":[]}'), 'application/vnd.api+json; charset=utf-8')).toStrictEqual({ ok: true, json: bytes('{"data":[]}') });
  });

  it('reports invalid JSON', () => {
    for (const text of ['{', '{"a":}', 'undefined', "{'a':1}", '{"a":1} trailing']) {
      expect(decodeBody(bytes(text), 'application/json')).toStrictEqual({ ok: false, code: 'INVALID_JSON' });
    }
    expect(decodeBody(bytes('nope'), 'application/ld+json')).toStrictEqual({ ok: false, code: 'INVALID_JSON' });
  });

  it('refuses JSON nested deeper than MAX_JSON_DEPTH, counting brackets outside strings only', () => {
    const nested = (depth: number, open = '[', close = ']') => open.repeat(depth) + close.repeat(depth);
    const deep = { ok: false, code: 'INVALID_JSON', message: `Request body JSON is nested deeper than ${MAX_JSON_DEPTH} levels` };
    expect(decodeBody(bytes(nested(MAX_JSON_DEPTH)), 'application/json')).toStrictEqual({ ok: true, json: bytes(nested(MAX_JSON_DEPTH)) });
    expect(decodeBody(bytes(nested(MAX_JSON_DEPTH + 1)), 'application/json')).toStrictEqual(deep);
    expect(decodeBody(bytes(`${'{"a":'.repeat(MAX_JSON_DEPTH + 1)}1${'}'.repeat(MAX_JSON_DEPTH + 1)}`), 'application/json')).toStrictEqual(deep);
    expect(decodeBody(bytes(nested(100_000)), 'application/json')).toStrictEqual(deep);
    // Brackets inside strings (escaped quotes included) are not nesting.
    const brackets = JSON.stringify({ s: `\\"${'['.repeat(MAX_JSON_DEPTH * 2)}`, t: '{'.repeat(MAX_JSON_DEPTH * 2) });
    expect(decodeBody(bytes(brackets), 'application/json')).toStrictEqual({ ok: true, json: bytes(brackets) });
    // Only JSON is counted: the same text as text/plain is a string.
    expect(decodeBody(bytes(nested(100_000)), 'text/plain')).toStrictEqual({ ok: true, body: nested(100_000) });
  });

  it('parses forms into a null-prototype object; last value wins; __proto__ stays data', () => {
    const result = decodeBody(
      bytes('a=1&b=two+words&a=3&__proto__=x&constructor=y&enc=%C3%A9%26'),
      'application/x-www-form-urlencoded; charset=utf-8',
    );
    if (!result.ok || !('body' in result)) throw new Error(`a form decodes to a body: ${JSON.stringify(result)}`);
    const body = result.body as Record<string, string>;
    expect(inheritsNothing(body)).toBe(true);
    expect(Object.keys(body)).toEqual(['a', 'b', '__proto__', 'constructor', 'enc']);
    expect(body.a).toBe('3');
    expect(body.b).toBe('two words');
    expect(Object.getOwnPropertyDescriptor(body, '__proto__')?.value).toBe('x');
    expect(body.constructor).toBe('y');
    expect(body.enc).toBe('é&');
    expect(JSON.stringify(body)).toBe('{"a":"3","b":"two words","__proto__":"x","constructor":"y","enc":"é&"}');
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });

  it('decodes text/* as a UTF-8 string', () => {
    expect(decodeBody(bytes('héllo'), 'text/plain')).toStrictEqual({ ok: true, body: 'héllo' });
    expect(decodeBody(bytes('<p/>'), 'text/html; charset=utf-8')).toStrictEqual({ ok: true, body: '<p/>' });
    expect(decodeBody(bytes('a,b'), 'TEXT/CSV')).toStrictEqual({ ok: true, body: 'a,b' });
  });

  it('encodes anything else, or no content type, as base64', () => {
    const binary = Buffer.from([0, 1, 2, 250, 255]);
    expect(decodeBody(binary, 'application/octet-stream')).toStrictEqual({ ok: true, body: binary.toString('base64') });
    expect(decodeBody(binary, undefined)).toStrictEqual({ ok: true, body: 'AAEC+v8=' });
    expect(decodeBody(bytes('{"a":1}'), 'application/jsonx')).toStrictEqual({
      ok: true,
      body: Buffer.from('{"a":1}').toString('base64'),
    });
    expect(decodeBody(bytes('x'), '')).toStrictEqual({ ok: true, body: 'eA==' });
  });

  it('round-trips any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = JSON.stringify(value);
        expect(decodeBody(bytes(text), 'application/json')).toStrictEqual({ ok: true, json: bytes(text) });
      }),
      { numRuns: 300 },
    );
  });
});

describe('searchParamsToObject', () => {
  it('keeps the last value of a repeated key and inherits nothing', () => {
    const out = searchParamsToObject(new URLSearchParams('q=1&q=2&hasOwnProperty=3'));
    expect(inheritsNothing(out)).toBe(true);
    expect('toString' in out).toBe(false);
    expect({ ...out }).toEqual({ q: '2', hasOwnProperty: '3' });
  });

  it('agrees with a last-wins reference on arbitrary pairs', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.string(), fc.string()), { maxLength: 10 }), (pairs) => {
        const params = new URLSearchParams(pairs);
        const expected = new Map<string, string>();
        for (const [key, value] of params) expected.set(key, value);
        const out = searchParamsToObject(params);
        // Sorted: objects list integer-like keys first, whatever the insertion order.
        expect(Object.keys(out).sort()).toEqual([...expected.keys()].sort());
        for (const [key, value] of expected) expect(Object.getOwnPropertyDescriptor(out, key)?.value).toBe(value);
      }),
      { numRuns: 300 },
    );
  });
});
