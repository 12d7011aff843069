import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ApiRequest } from '../../src/http/api-request.js';
import { apiRequestData, apiRequestJson, apiRequestWithJsonBody, clientIp, flattenHeaders, requestChanged } from '../../src/http/api-request.js';
import { deepMerge } from '../../src/middleware/merge.js';
import { inheritsNothing } from '../../src/values.js';

function fakeRequest(headers: IncomingHttpHeaders, remoteAddress: string | undefined): IncomingMessage {
  return { headers, socket: { remoteAddress } } as unknown as IncomingMessage;
}

describe('flattenHeaders', () => {
  it('keeps single values, joins repeated ones with ", " and skips undefined', () => {
    const out = flattenHeaders({
      'content-type': 'application/json',
      'set-cookie': ['a=1', 'b=2'],
      'x-missing': undefined,
    });
    expect({ ...out }).toStrictEqual({ 'content-type': 'application/json', 'set-cookie': 'a=1, b=2' });
    expect('x-missing' in out).toBe(false);
  });

  it('returns an object that inherits nothing, so header names like __proto__ stay data', () => {
    const headers = JSON.parse('{"__proto__":"x","constructor":"y"}') as IncomingHttpHeaders;
    const out = flattenHeaders(headers);
    expect(inheritsNothing(out)).toBe(true);
    expect('toString' in out).toBe(false);
    expect(JSON.stringify(out)).toBe('{"__proto__":"x","constructor":"y"}');
    expect(Object.getOwnPropertyDescriptor(out, '__proto__')?.value).toBe('x');
    expect(out.constructor).toBe('y');
  });

  it('returns an empty object for no headers', () => {
    expect(Object.keys(flattenHeaders({}))).toEqual([]);
  });
});

describe('clientIp', () => {
  it('uses the socket peer without trust_proxy, ignoring X-Forwarded-For', () => {
    expect(clientIp(fakeRequest({ 'x-forwarded-for': '203.0.113.7' }, '10.0.0.1'), false)).toBe('10.0.0.1');
  });

  it('strips the IPv4-mapped IPv6 prefix', () => {
    expect(clientIp(fakeRequest({}, '::ffff:127.0.0.1'), false)).toBe('127.0.0.1');
    expect(clientIp(fakeRequest({ 'x-forwarded-for': '::ffff:198.51.100.2' }, '10.0.0.1'), true)).toBe('198.51.100.2');
    expect(clientIp(fakeRequest({}, '::1'), false)).toBe('::1');
  });

  it('answers an empty string when the socket has no address', () => {
    expect(clientIp(fakeRequest({}, undefined), false)).toBe('');
  });

  it('with trust_proxy uses the left-most X-Forwarded-For entry, trimmed', () => {
    expect(clientIp(fakeRequest({ 'x-forwarded-for': ' 203.0.113.7 , 10.0.0.2, 10.0.0.3' }, '10.0.0.1'), true)).toBe(
      '203.0.113.7',
    );
    expect(clientIp(fakeRequest({ 'x-forwarded-for': '2001:db8::1' }, '10.0.0.1'), true)).toBe('2001:db8::1');
  });

  it('with trust_proxy uses the first of repeated X-Forwarded-For headers', () => {
    const headers = { 'x-forwarded-for': ['198.51.100.1, 10.0.0.9', '192.0.2.1'] } as unknown as IncomingHttpHeaders;
    expect(clientIp(fakeRequest(headers, '10.0.0.1'), true)).toBe('198.51.100.1');
  });

  it('with trust_proxy falls back to the socket when X-Forwarded-For is absent or empty', () => {
    expect(clientIp(fakeRequest({}, '10.0.0.1'), true)).toBe('10.0.0.1');
    expect(clientIp(fakeRequest({ 'x-forwarded-for': '' }, '10.0.0.1'), true)).toBe('10.0.0.1');
    expect(clientIp(fakeRequest({ 'x-forwarded-for': ' , 1.2.3.4' }, '10.0.0.1'), true)).toBe('10.0.0.1');
  });
});

describe('deferred JSON bodies', () => {
  const request = (body: unknown): ApiRequest => ({
    path: '/p',
    method: 'POST',
    path_params: { id: '1' },
    query_params: { q: 'x' },
    body,
    headers: { 'content-type': 'application/json' },
    trigger: { type: 'http', path: '/p', method: 'POST' },
    context: { user: 'u' },
    request_id: 'r',
    ip: '127.0.0.1',
  });
  const deferred = (text: string): ApiRequest => {
    const { body: _unused, ...fields } = request(undefined);
    return apiRequestWithJsonBody(fields, text);
  };
  const deferredBytes = (bytes: Buffer): ApiRequest => {
    const { body: _unused, ...fields } = request(undefined);
    return apiRequestWithJsonBody(fields, bytes);
  };

  it('gives the worker the same values as serialising the request with the parsed body', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom('', ' ', '\n  '), (value, pad) => {
        const text = `${pad}${JSON.stringify(value)}${pad}`;
        const expected: unknown = JSON.parse(JSON.stringify(request(JSON.parse(text))));
        expect(JSON.parse(apiRequestJson(deferred(text)))).toStrictEqual(expected);
        expect(JSON.parse(apiRequestData(deferred(text)).json)).toStrictEqual(expected);
      }),
      { numRuns: 300 },
    );
  });

  it('a body held as bytes gives the same JSON as the same body as text, and data that keeps the bytes', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom('', ' ', '\n  '), fc.option(fc.constant('"response":{"channel_id":"c2"}'), { nil: undefined }), (value, pad, extra) => {
        const text = `${pad}${JSON.stringify(value)}${pad}`;
        const fromBytes = deferredBytes(Buffer.from(text));
        const data = apiRequestData(fromBytes, extra);
        expect(data.parts?.bytes.toString()).toBe(text);
        expect(data.json).toBe(apiRequestJson(deferred(text), extra));
        expect(apiRequestJson(fromBytes, extra)).toBe(apiRequestJson(deferred(text), extra));
        expect(fromBytes.body).toStrictEqual(JSON.parse(text));
      }),
      { numRuns: 300 },
    );
  });

  it('a body held as bytes and read after its request JSON was kept: the read value is what goes out', () => {
    const req = deferredBytes(Buffer.from('{"n":1}'));
    expect(apiRequestData(req).parts).toBeDefined();
    (req.body as { n: number }).n = 2;
    expect(apiRequestData(req).parts).toBeUndefined();
    expect(JSON.parse(apiRequestData(req).json)).toMatchObject({ body: { n: 2 } });
    expect(JSON.parse(apiRequestJson(req))).toMatchObject({ body: { n: 2 } });
  });

  it('keeps the body text as sent: a __proto__ key and numbers JSON cannot re-serialise survive', () => {
    const text = '{"__proto__":{"x":1},"big":1e400}';
    const sent = JSON.parse(apiRequestJson(deferred(text))) as { body: Record<string, unknown> };
    expect(Object.keys(sent.body)).toEqual(['__proto__', 'big']);
    expect(sent.body.big).toBe(Infinity);
  });

  it('parses the text once when the body is read; from then on the parsed value is the body', () => {
    const req = deferred('{"a":{"b":1},"n":2}');
    const body = req.body as Record<string, unknown>;
    expect(body).toStrictEqual({ a: { b: 1 }, n: 2 });
    expect(req.body).toBe(body);
    body.n = 3;
    expect(JSON.parse(apiRequestJson(req))).toMatchObject({ body: { a: { b: 1 }, n: 3 } });
  });

  it('a middleware patch of the body merges into the parsed body, and is what the worker gets', () => {
    const req = deferred('{"a":{"b":1},"keep":true}');
    deepMerge(req as unknown as Record<string, unknown>, { body: { a: { c: 2 } } });
    expect(JSON.parse(apiRequestJson(req))).toMatchObject({ body: { a: { b: 1, c: 2 }, keep: true } });
    const replaced = deferred('{"a":1}');
    replaced.body = [1, 2];
    expect((JSON.parse(apiRequestJson(replaced)) as { body: unknown }).body).toStrictEqual([1, 2]);
  });

  it('keeps the text out of keys and JSON, and the body key in its place', () => {
    const req = deferred('[1]');
    expect(Object.keys(req)).toEqual(Object.keys(request(undefined)));
    expect(JSON.stringify(req)).toBe(JSON.stringify(request([1])));
  });

  it('serialises a request that never had a deferred body as it is', () => {
    const req = request({ form: 'field' });
    expect(apiRequestJson(req)).toBe(JSON.stringify(req));
  });
});

describe('request JSON kept from one invocation to the next', () => {
  const fields = {
    path: '/items/7',
    method: 'GET',
    path_params: {} as Record<string, string>,
    query_params: {},
    headers: { host: 'h' } as Record<string, string>,
    trigger: { type: 'http' as const, path: '/items/7', method: 'GET' },
    context: {} as Record<string, unknown>,
    request_id: 'r',
    ip: '127.0.0.1',
  };

  it('is built once until requestChanged: then the change is what the next invocation gets', () => {
    for (const req of [{ ...fields, headers: { ...fields.headers }, body: null } as ApiRequest, apiRequestWithJsonBody({ ...fields, headers: { ...fields.headers } }, '{"a":1}')]) {
      const first = apiRequestJson(req);
      // Changed without telling: the kept text is what goes out (the contract callers keep).
      req.headers['x-added'] = '1';
      expect(apiRequestJson(req)).toBe(first);
      requestChanged(req);
      expect(JSON.parse(apiRequestJson(req))).toMatchObject({ headers: { host: 'h', 'x-added': '1' } });
      req.path_params = { id: '7' };
      requestChanged(req);
      expect(JSON.parse(apiRequestJson(req))).toMatchObject({ path_params: { id: '7' } });
    }
  });

  it('appends the extra members to the kept text, with or without an untouched body', () => {
    const refs = '"request_body":{"channel_id":"c1"},"response":{"channel_id":"c2"}';
    for (const req of [{ ...fields, body: { b: 2 } } as ApiRequest, apiRequestWithJsonBody(fields, '{"b":2}')]) {
      apiRequestJson(req);
      expect(JSON.parse(apiRequestJson(req, refs))).toStrictEqual({ ...JSON.parse(JSON.stringify({ ...fields, body: { b: 2 } })), request_body: { channel_id: 'c1' }, response: { channel_id: 'c2' } });
      expect(JSON.parse(apiRequestJson(req))).not.toHaveProperty('response');
    }
  });

  it('a body assignment is a change: the new body goes out', () => {
    const req = apiRequestWithJsonBody(fields, '{"old":true}');
    apiRequestJson(req);
    req.body = { new: true };
    expect((JSON.parse(apiRequestJson(req)) as { body: unknown }).body).toStrictEqual({ new: true });
  });
});

