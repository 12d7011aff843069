import type { ServerResponse } from 'node:http';
import { describe, expect, it, vi } from 'vitest';
import { HTTP_ERRORS } from '../../src/errors.js';
import type { HttpErrorCode } from '../../src/errors.js';
import type { HttpReply, MapResult } from '../../src/http/response.js';
import { errorReply, mapApiResponse, workerErrorReply, writeReply } from '../../src/http/response.js';

const ok = (reply: HttpReply): MapResult => ({ ok: true, reply });

/** The one header problem a response had: the header is left out, the response still sent. */
function dropped(value: unknown): string | undefined {
  const result = mapApiResponse(value);
  if (!result.ok) throw new Error(`expected a response, got a rejection: ${result.message}`);
  expect(result.reply.droppedHeaders).toHaveLength(1);
  return result.reply.droppedHeaders?.[0];
}

function rejected(value: unknown): string {
  const result = mapApiResponse(value);
  if (result.ok) throw new Error(`expected a rejection, got ${JSON.stringify(result.reply)}`);
  return result.message;
}

describe('mapApiResponse: status', () => {
  it('defaults a missing or null status to 200', () => {
    expect(mapApiResponse({ body: { a: 1 } })).toStrictEqual(
      ok({ status: 200, headers: [['content-type', 'application/json']], body: '{"a":1}' }),
    );
    expect(mapApiResponse({ status_code: null, body: 'x' })).toStrictEqual(
      ok({ status: 200, headers: [['content-type', 'application/json']], body: '"x"' }),
    );
  });

  it('accepts integer statuses from 200 to 599', () => {
    for (const status of [200, 201, 302, 404, 418, 500, 599]) {
      const result = mapApiResponse({ status_code: status });
      expect(result.ok ? result.reply.status : result.message).toBe(status);
    }
  });

  it('rejects statuses out of bounds, fractional or not numbers', () => {
    expect(rejected({ status_code: 199 })).toBe('invalid status_code 199 (must be an integer 200-599)');
    expect(rejected({ status_code: 600 })).toBe('invalid status_code 600 (must be an integer 200-599)');
    expect(rejected({ status_code: 100 })).toBe('invalid status_code 100 (must be an integer 200-599)');
    expect(rejected({ status_code: 0 })).toBe('invalid status_code 0 (must be an integer 200-599)');
    expect(rejected({ status_code: -200 })).toBe('invalid status_code -200 (must be an integer 200-599)');
    expect(rejected({ status_code: 200.5 })).toBe('invalid status_code 200.5 (must be an integer 200-599)');
    expect(rejected({ status_code: '200' })).toBe('invalid status_code "200" (must be an integer 200-599)');
    expect(rejected({ status_code: true })).toBe('invalid status_code true (must be an integer 200-599)');
  });

  it('rejects a result that is not an object', () => {
    for (const value of [null, undefined, 'ok', 200, [{ status_code: 200 }]]) {
      expect(rejected(value)).toBe('handler result is not an ApiResponse object');
    }
  });
});

describe('mapApiResponse: headers', () => {
  it('accepts a map, lower-casing names and stringifying numbers and booleans', () => {
    expect(
      mapApiResponse({ status_code: 204, headers: { 'X-Count': 3, 'X-Flag': true, 'Cache-Control': 'no-store' } }),
    ).toStrictEqual(
      ok({
        status: 204,
        headers: [
          ['x-count', '3'],
          ['x-flag', 'true'],
          ['cache-control', 'no-store'],
        ],
        body: undefined,
      }),
    );
  });

  it('accepts an array of "Name: value" strings, trimming around the colon, keeping colons in values', () => {
    expect(
      mapApiResponse({ status_code: 204, headers: ['X-A: 1', 'Location:/next', '  X-Time :  12:30:00  '] }),
    ).toStrictEqual(
      ok({
        status: 204,
        headers: [
          ['x-a', '1'],
          ['location', '/next'],
          ['x-time', '12:30:00'],
        ],
        body: undefined,
      }),
    );
  });

  it('keeps every Set-Cookie: map with an array value, and repeated array entries', () => {
    expect(mapApiResponse({ status_code: 204, headers: { 'Set-Cookie': ['a=1; Path=/', 'b=2'] } })).toStrictEqual(
      ok({
        status: 204,
        headers: [
          ['set-cookie', 'a=1; Path=/'],
          ['set-cookie', 'b=2'],
        ],
        body: undefined,
      }),
    );
    expect(mapApiResponse({ status_code: 204, headers: ['Set-Cookie: a=1', 'Set-Cookie: b=2'] })).toStrictEqual(
      ok({
        status: 204,
        headers: [
          ['set-cookie', 'a=1'],
          ['set-cookie', 'b=2'],
        ],
        body: undefined,
      }),
    );
  });

  it('treats null or missing headers as none', () => {
    expect(mapApiResponse({ status_code: 204, headers: null })).toStrictEqual(ok({ status: 204, headers: [], body: undefined }));
    expect(mapApiResponse({ status_code: 204 })).toStrictEqual(ok({ status: 204, headers: [], body: undefined }));
  });

  it('drops a header with CR, LF, NUL or another control character in its value, in both forms', () => {
    expect(dropped({ headers: { 'X-A': 'a\r\nSet-Cookie: evil=1' } })).toBe(
      'header X-A contains forbidden characters (CR, LF or control)',
    );
    expect(dropped({ headers: { 'X-A': 'a\nb' } })).toBe('header X-A contains forbidden characters (CR, LF or control)');
    expect(dropped({ headers: { 'X-A': 'a\rb' } })).toBe('header X-A contains forbidden characters (CR, LF or control)');
    expect(dropped({ headers: { 'X-A': 'a\0b' } })).toBe('header X-A contains forbidden characters (CR, LF or control)');
    expect(dropped({ headers: { 'X-A': 'a\x7fb' } })).toBe('header X-A contains forbidden characters (CR, LF or control)');
    expect(dropped({ headers: { 'X-A': 'a\x01b' } })).toBe('header X-A contains forbidden characters (CR, LF or control)');
    expect(dropped({ headers: ['X-A: a\r\nb'] })).toBe('header X-A contains forbidden characters (CR, LF or control)');
    expect(dropped({ headers: ['X-A: a\0b'] })).toBe('header X-A contains forbidden characters (CR, LF or control)');
    expect(dropped({ headers: { 'Set-Cookie': ['ok=1', 'bad=\n'] } })).toBe(
      'header Set-Cookie contains forbidden characters (CR, LF or control)',
    );
  });

  it('allows tabs and Latin-1 bytes in values but not characters above U+00FF', () => {
    expect(mapApiResponse({ status_code: 204, headers: { 'X-A': 'a\tb', 'X-B': 'caf\u00e9' } })).toStrictEqual(
      ok({
        status: 204,
        headers: [
          ['x-a', 'a\tb'],
          ['x-b', 'caf\u00e9'],
        ],
        body: undefined,
      }),
    );
    expect(dropped({ headers: { 'X-A': '\u20ac' } })).toBe('header X-A contains forbidden characters (CR, LF or control)');
  });

  it('drops a header with a bad name', () => {
    expect(dropped({ headers: { 'X A': '1' } })).toBe('invalid header name "X A"');
    expect(dropped({ headers: { 'X-A\r\n': '1' } })).toBe('invalid header name "X-A\\r\\n"');
    expect(dropped({ headers: { '': '1' } })).toBe('invalid header name ""');
    expect(dropped({ headers: { 'X(A)': '1' } })).toBe('invalid header name "X(A)"');
    expect(dropped({ headers: { 'Caf\u00e9': '1' } })).toBe('invalid header name "Caf\u00e9"');
    expect(dropped({ headers: ['X A: 1'] })).toBe('invalid header name "X A"');
  });

  it('drops malformed array entries and header containers', () => {
    expect(dropped({ headers: ['no colon'] })).toBe('header "no colon" is not "Name: value"');
    expect(dropped({ headers: [': empty name'] })).toBe('header ": empty name" is not "Name: value"');
    expect(dropped({ headers: [['X-A', '1']] })).toBe('headers array items must be "Name: value" strings');
    expect(dropped({ headers: [42] })).toBe('headers array items must be "Name: value" strings');
    expect(dropped({ headers: 'X-A: 1' })).toBe('headers must be an object or an array of "Name: value" strings');
    expect(dropped({ headers: 5 })).toBe('headers must be an object or an array of "Name: value" strings');
  });

  it('drops header values that are not strings, finite numbers or booleans', () => {
    expect(dropped({ headers: { 'X-A': Infinity } })).toBe('invalid value for header X-A');
    expect(dropped({ headers: { 'X-A': -Infinity } })).toBe('invalid value for header X-A');
    expect(dropped({ headers: { 'X-A': Number.NaN } })).toBe('invalid value for header X-A');
    expect(dropped({ headers: { 'X-A': { v: 1 } } })).toBe('invalid value for header X-A');
    expect(dropped({ headers: { 'X-A': null } })).toBe('invalid value for header X-A');
    expect(dropped({ headers: { 'X-A': [1, { v: 1 }] } })).toBe('invalid value for header X-A');
  });

  it('drops headers the engine owns, in any case and in both forms', () => {
    expect(
      mapApiResponse({
        status_code: 200,
        headers: {
          'Content-Length': '999',
          'Transfer-Encoding': 'chunked',
          Connection: 'close',
          'Keep-Alive': 'timeout=5',
          Upgrade: 'websocket',
          Trailer: 'X-Sum',
          'X-Kept': 'yes',
        },
      }),
    ).toStrictEqual(ok({ status: 200, headers: [['x-kept', 'yes'], ['content-type', 'application/json']], body: '{}' }));
    expect(mapApiResponse({ headers: ['content-length: 1', 'X-Kept: yes', 'CONNECTION: close'] })).toStrictEqual(
      ok({ status: 200, headers: [['x-kept', 'yes'], ['content-type', 'application/json']], body: '{}' }),
    );
  });

  it('still reports invalid engine-owned headers', () => {
    expect(dropped({ headers: { 'Content-Length': '1\r\n' } })).toBe(
      'header Content-Length contains forbidden characters (CR, LF or control)',
    );
  });
});

describe('mapApiResponse: body', () => {
  it('sends a string body as is when a content type is set', () => {
    expect(mapApiResponse({ status_code: 200, headers: { 'Content-Type': 'text/html' }, body: '<p>hi</p>' })).toStrictEqual(
      ok({ status: 200, headers: [['content-type', 'text/html']], body: '<p>hi</p>' }),
    );
    expect(mapApiResponse({ headers: ['Content-Type: text/plain'], body: '' })).toStrictEqual(
      ok({ status: 200, headers: [['content-type', 'text/plain']], body: '' }),
    );
  });

  it('sends a string body without a content type as JSON', () => {
    expect(mapApiResponse({ status_code: 200, body: 'hello' })).toStrictEqual(
      ok({ status: 200, headers: [['content-type', 'application/json']], body: '"hello"' }),
    );
  });

  it('serialises non-string bodies as JSON, keeping a given content type', () => {
    expect(mapApiResponse({ status_code: 201, body: { id: '42', tags: [1, 2] } })).toStrictEqual(
      ok({ status: 201, headers: [['content-type', 'application/json']], body: '{"id":"42","tags":[1,2]}' }),
    );
    expect(
      mapApiResponse({ headers: { 'content-type': 'application/problem+json' }, body: { title: 'x' } }),
    ).toStrictEqual(ok({ status: 200, headers: [['content-type', 'application/problem+json']], body: '{"title":"x"}' }));
    for (const [body, json] of [
      [0, '0'],
      [false, 'false'],
      [[], '[]'],
    ] as const) {
      expect(mapApiResponse({ body })).toStrictEqual(
        ok({ status: 200, headers: [['content-type', 'application/json']], body: json }),
      );
    }
  });

  it('rejects a body too deeply nested to serialise, instead of throwing', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(rejected({ status_code: 200, body: deep })).toBe('body cannot be serialised as JSON: Maximum call stack size exceeded');
  });

  it('sends {} for a missing body and null for a null one, as JSON, as iii does', () => {
    expect(mapApiResponse({ status_code: 200, body: null })).toStrictEqual(ok({ status: 200, headers: [['content-type', 'application/json']], body: 'null' }));
    expect(mapApiResponse({ status_code: 202 })).toStrictEqual(ok({ status: 202, headers: [['content-type', 'application/json']], body: '{}' }));
    // The handler's own content type: a missing body is still {}, a null one sends nothing.
    expect(mapApiResponse({ headers: { 'content-type': 'text/plain' } })).toStrictEqual(ok({ status: 200, headers: [['content-type', 'text/plain']], body: '{}' }));
    expect(mapApiResponse({ headers: { 'content-type': 'text/plain' }, body: null })).toStrictEqual(ok({ status: 200, headers: [['content-type', 'text/plain']], body: undefined }));
  });

  it('leaves an invalid header out and sends the rest, saying why', () => {
    const result = mapApiResponse({ status_code: 201, headers: ['X-Ok: 1', 'X-Evil: a\r\nInjected: yes', 42, 'Bad Name: x'], body: { a: 1 } });
    expect(result).toStrictEqual(
      ok({
        status: 201,
        headers: [['x-ok', '1'], ['content-type', 'application/json']],
        body: '{"a":1}',
        droppedHeaders: [
          'header X-Evil contains forbidden characters (CR, LF or control)',
          'headers array items must be "Name: value" strings',
          'invalid header name "Bad Name"',
        ],
      }),
    );
  });

  it('sends no body for 204 and 304 even when one is given', () => {
    expect(mapApiResponse({ status_code: 204, body: { a: 1 } })).toStrictEqual(
      ok({ status: 204, headers: [], body: undefined }),
    );
    expect(mapApiResponse({ status_code: 304, headers: { ETag: '"v1"' }, body: 'x' })).toStrictEqual(
      ok({ status: 304, headers: [['etag', '"v1"']], body: undefined }),
    );
  });
});

describe('errorReply', () => {
  it('builds the envelope with the registry status and message', () => {
    expect(errorReply('NOT_FOUND', 'req-1')).toStrictEqual({
      status: 404,
      headers: [['content-type', 'application/json']],
      body: '{"error":{"code":"NOT_FOUND","message":"No route matches this request"},"request_id":"req-1"}',
      errorCode: 'NOT_FOUND',
    });
  });

  it('uses the registry for every HTTP error code', () => {
    for (const [code, { status, message }] of Object.entries(HTTP_ERRORS)) {
      const reply = errorReply(code as HttpErrorCode, 'r');
      expect(reply.status).toBe(status);
      expect(JSON.parse(reply.body as string)).toStrictEqual({ error: { code, message }, request_id: 'r' });
    }
  });

  it('uses the architecture table statuses', () => {
    expect(errorReply('CONDITION_NOT_MET', 'r').status).toBe(422);
    expect(errorReply('PAYLOAD_TOO_LARGE', 'r').status).toBe(413);
    expect(errorReply('INVALID_JSON', 'r').status).toBe(400);
    expect(errorReply('OVERLOADED', 'r').status).toBe(503);
    expect(errorReply('FUNCTION_UNAVAILABLE', 'r').status).toBe(503);
    expect(errorReply('TIMEOUT', 'r').status).toBe(504);
    expect(errorReply('WORKER_DISCONNECTED', 'r').status).toBe(502);
    expect(errorReply('INVALID_RESPONSE', 'r').status).toBe(502);
    expect(errorReply('MIDDLEWARE_FAILED', 'r').status).toBe(500);
    expect(errorReply('SHUTTING_DOWN', 'r').status).toBe(503);
  });

  it('relays a worker\'s own code and message with 500 (workerErrorReply: the path for codes outside the registry)', () => {
    expect(workerErrorReply({ code: 'invocation_failed', message: 'boom' }, 'r')).toStrictEqual({
      status: 500,
      headers: [['content-type', 'application/json']],
      body: '{"error":{"code":"invocation_failed","message":"boom"},"request_id":"r"}',
      errorCode: 'invocation_failed',
    });
  });

  it('applies message, extra fields and headers from options; the status is the code\'s', () => {
    expect(
      errorReply('CONDITION_NOT_MET', 'r', {
        message: 'custom',
        extra: { skipped: true },
        headers: [['retry-after', '1']],
      }),
    ).toStrictEqual({
      status: 422,
      headers: [
        ['content-type', 'application/json'],
        ['retry-after', '1'],
      ],
      body: '{"error":{"code":"CONDITION_NOT_MET","message":"custom"},"skipped":true,"request_id":"r"}',
      errorCode: 'CONDITION_NOT_MET',
    });
  });
});

describe('writeReply', () => {
  function fakeResponse() {
    const headers = new Map<string, unknown>();
    const setHeader = vi.fn((name: string, value: unknown) => {
      headers.set(name, value);
    });
    const end = vi.fn();
    const res = {
      setHeader,
      end,
      statusCode: 0,
      // Node's writeHead(status, [name, value, …]): the names are distinct on this path.
      writeHead: vi.fn((status: number, flat: string[]) => {
        res.statusCode = status;
        for (let i = 0; i < flat.length; i += 2) headers.set(flat[i] as string, flat[i + 1]);
      }),
    };
    return { res, headers, setHeader, end };
  }

  it('writes distinct headers in one writeHead: the reply\'s, the engine\'s, then content-length', () => {
    const { res, setHeader, end } = fakeResponse();
    writeReply(
      res as unknown as ServerResponse,
      { status: 200, headers: [['content-type', 'application/json'], ['x-a', '1']], body: '{"é":1}' },
      { 'x-request-id': 'engine-id', vary: 'Origin' },
    );
    expect(res.writeHead).toHaveBeenCalledExactlyOnceWith(200, [
      'content-type', 'application/json',
      'x-a', '1',
      'x-request-id', 'engine-id',
      'vary', 'Origin',
      'content-length', String(Buffer.byteLength('{"é":1}')),
    ]);
    expect(setHeader).not.toHaveBeenCalled();
    expect(end).toHaveBeenCalledExactlyOnceWith('{"é":1}');
  });

  it('writes status, grouped repeated headers, engine headers and content-length', () => {
    const { res, headers, end } = fakeResponse();
    writeReply(
      res as unknown as ServerResponse,
      {
        status: 201,
        headers: [
          ['set-cookie', 'a=1'],
          ['set-cookie', 'b=2'],
          ['set-cookie', 'c=3'],
          ['x-request-id', 'from-handler'],
          ['content-type', 'application/json'],
        ],
        body: '{"é":1}',
      },
      { 'x-request-id': 'engine-id' },
    );
    expect(res.statusCode).toBe(201);
    expect(headers.get('set-cookie')).toEqual(['a=1', 'b=2', 'c=3']);
    expect(headers.get('x-request-id')).toBe('engine-id');
    expect(headers.get('content-type')).toBe('application/json');
    expect(headers.get('content-length')).toBe(Buffer.byteLength('{"é":1}'));
    expect(end).toHaveBeenCalledExactlyOnceWith('{"é":1}');
  });

  it('takes a reply with many headers through the grouped path (the flat path\'s repeat check is quadratic)', () => {
    const { res, headers, setHeader } = fakeResponse();
    const many = Array.from({ length: 5000 }, (_, i): [string, string] => [`x-h${i}`, String(i)]);
    writeReply(res as unknown as ServerResponse, { status: 200, headers: many, body: 'ok' }, { 'x-request-id': 'engine-id' });
    expect(res.writeHead).not.toHaveBeenCalled();
    expect(setHeader).toHaveBeenCalledTimes(5002);
    expect(headers.get('x-h4999')).toBe('4999');
    expect(headers.get('x-request-id')).toBe('engine-id');
  });

  it('sends content-length 0 for an empty reply, except 204 and 304', () => {
    const a = fakeResponse();
    writeReply(a.res as unknown as ServerResponse, { status: 200, headers: [], body: undefined }, {});
    expect(a.headers.get('content-length')).toBe('0');
    expect(a.end).toHaveBeenCalledExactlyOnceWith();

    for (const status of [204, 304]) {
      const b = fakeResponse();
      writeReply(b.res as unknown as ServerResponse, { status, headers: [], body: undefined }, {});
      expect(b.res.statusCode).toBe(status);
      expect(b.headers.has('content-length')).toBe(false);
      expect(b.end).toHaveBeenCalledExactlyOnceWith();
    }
  });
});
