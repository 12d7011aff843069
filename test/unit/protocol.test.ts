import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { DecodeResult } from '../../src/protocol/decode.js';
import { decodeFrame, decodeMessage } from '../../src/protocol/decode.js';
import { encodeFrame, encodeInvocation, encodeInvocationResult, jsonString } from '../../src/protocol/encode.js';
import type { EngineWireError, InboundMessage } from '../../src/protocol/messages.js';
import { relayed } from '../../src/protocol/messages.js';

/** Decodes and insists on a message; returns it for exact comparison. */
function message(frame: unknown): InboundMessage {
  const result = decodeFrame(typeof frame === 'string' ? frame : JSON.stringify(frame));
  if (result.kind !== 'message') throw new Error(`expected a message, got ${JSON.stringify(result)}`);
  return result.message;
}

function invalidReason(frame: unknown): DecodeResult {
  return decodeFrame(JSON.stringify(frame));
}

const invalidMessage = (reason: string): DecodeResult => ({ kind: 'invalid', code: 'invalid_message', reason });

describe('decodeFrame: registerfunction', () => {
  it('decodes the minimal frame to exactly type and id', () => {
    expect(message({ type: 'registerfunction', id: 'api::getUser' })).toStrictEqual({
      type: 'registerfunction',
      id: 'api::getUser',
    });
  });

  it('keeps every optional field when present', () => {
    const frame = {
      type: 'registerfunction',
      id: 'api::getUser',
      description: 'gets a user',
      request_format: { type: 'object', properties: { id: { type: 'string' } } },
      response_format: ['string'],
      metadata: { team: 'core' },
      invocation: { url: 'https://example.com/fn', method: 'POST' },
    };
    expect(message(frame)).toStrictEqual(frame);
  });

  it('keeps falsy but present formats', () => {
    expect(message({ type: 'registerfunction', id: 'f', request_format: false, response_format: 0 })).toStrictEqual({
      type: 'registerfunction',
      id: 'f',
      request_format: false,
      response_format: 0,
    });
  });

  it('drops unknown fields (message_type) and null or mistyped optionals', () => {
    expect(
      message({
        type: 'registerfunction',
        id: 'f',
        message_type: 'registerfunction',
        extra: 1,
        description: 42,
        metadata: ['not', 'an', 'object'],
        request_format: null,
        response_format: null,
        invocation: null,
      }),
    ).toStrictEqual({ type: 'registerfunction', id: 'f' });
  });

  it('rejects a missing, empty, blank or non-string id', () => {
    const reason = invalidMessage('registerfunction needs a non-empty "id"');
    expect(invalidReason({ type: 'registerfunction' })).toStrictEqual(reason);
    expect(invalidReason({ type: 'registerfunction', id: '' })).toStrictEqual(reason);
    expect(invalidReason({ type: 'registerfunction', id: '   ' })).toStrictEqual(reason);
    expect(invalidReason({ type: 'registerfunction', id: 7 })).toStrictEqual(reason);
  });
});

describe('decodeFrame: unregisterfunction', () => {
  it('decodes id and drops the rest', () => {
    expect(message({ type: 'unregisterfunction', id: 'f', message_type: 'x' })).toStrictEqual({
      type: 'unregisterfunction',
      id: 'f',
    });
  });

  it('rejects a missing id', () => {
    expect(invalidReason({ type: 'unregisterfunction' })).toStrictEqual(
      invalidMessage('unregisterfunction needs "id"'),
    );
  });
});

describe('decodeFrame: registertrigger', () => {
  const sdkFrame = {
    type: 'registertrigger',
    id: '788eb25f-0000-4000-8000-000000000000',
    trigger_type: 'http',
    function_id: 'api::getUser',
    config: { api_path: '/users/:id', http_method: 'GET', condition_function_id: 'api::allowed' },
  };

  it('decodes the frame the SDK sends, config passed through as data', () => {
    expect(message({ ...sdkFrame, message_type: 'registertrigger' })).toStrictEqual(sdkFrame);
  });

  it('keeps metadata when it is an object and drops it otherwise', () => {
    expect(message({ ...sdkFrame, metadata: { a: 1 } })).toStrictEqual({ ...sdkFrame, metadata: { a: 1 } });
    expect(message({ ...sdkFrame, metadata: 'x' })).toStrictEqual(sdkFrame);
  });

  it('treats a missing or null config as an empty object', () => {
    const { config: _config, ...withoutConfig } = sdkFrame;
    expect(message(withoutConfig)).toStrictEqual({ ...withoutConfig, config: {} });
    expect(message({ ...withoutConfig, config: null })).toStrictEqual({ ...withoutConfig, config: {} });
  });

  it('rejects a config that is not an object', () => {
    const reason = invalidMessage('registertrigger "config" must be an object');
    expect(invalidReason({ ...sdkFrame, config: [1] })).toStrictEqual(reason);
    expect(invalidReason({ ...sdkFrame, config: 'x' })).toStrictEqual(reason);
  });

  it('rejects missing required fields with a reason naming the field', () => {
    expect(invalidReason({ ...sdkFrame, id: undefined })).toStrictEqual(invalidMessage('registertrigger needs "id"'));
    expect(invalidReason({ ...sdkFrame, trigger_type: undefined })).toStrictEqual(
      invalidMessage('registertrigger needs "trigger_type"'),
    );
    expect(invalidReason({ ...sdkFrame, trigger_type: '' })).toStrictEqual(
      invalidMessage('registertrigger needs "trigger_type"'),
    );
    expect(invalidReason({ ...sdkFrame, function_id: undefined })).toStrictEqual(
      invalidMessage('registertrigger needs "function_id"'),
    );
  });
});

describe('decodeFrame: unregistertrigger', () => {
  it('decodes with and without trigger_type', () => {
    expect(message({ type: 'unregistertrigger', id: 't1', trigger_type: 'http', message_type: 'x' })).toStrictEqual({
      type: 'unregistertrigger',
      id: 't1',
      trigger_type: 'http',
    });
    expect(message({ type: 'unregistertrigger', id: 't1' })).toStrictEqual({ type: 'unregistertrigger', id: 't1' });
    expect(message({ type: 'unregistertrigger', id: 't1', trigger_type: 3 })).toStrictEqual({
      type: 'unregistertrigger',
      id: 't1',
    });
  });

  it('rejects a missing id', () => {
    expect(invalidReason({ type: 'unregistertrigger', trigger_type: 'http' })).toStrictEqual(
      invalidMessage('unregistertrigger needs "id"'),
    );
  });
});

describe('decodeFrame: invokefunction', () => {
  it('decodes every optional field when present', () => {
    const frame = {
      type: 'invokefunction',
      invocation_id: '3b952f96-0000-4000-8000-000000000000',
      function_id: 'api::getUser',
      data: { path: '/users/42' },
      traceparent: '00-abc-def-01',
      baggage: 'k=v',
      action: { type: 'void' },
      metadata: { runtime: 'node' },
    };
    expect(message(frame)).toStrictEqual(frame);
  });

  it('decodes the minimal frame: no invocation_id, missing data becomes null', () => {
    expect(message({ type: 'invokefunction', function_id: 'engine::workers::register' })).toStrictEqual({
      type: 'invokefunction',
      function_id: 'engine::workers::register',
      data: null,
    });
  });

  it('keeps falsy data as it is', () => {
    expect(message({ type: 'invokefunction', function_id: 'f', data: 0 })).toMatchObject({ data: 0 });
    expect(message({ type: 'invokefunction', function_id: 'f', data: false })).toMatchObject({ data: false });
    expect(message({ type: 'invokefunction', function_id: 'f', data: '' })).toMatchObject({ data: '' });
  });

  it('reduces action to its type and drops a malformed action', () => {
    expect(message({ type: 'invokefunction', function_id: 'f', data: 1, action: { type: 'void', x: 1 } })).toStrictEqual(
      { type: 'invokefunction', function_id: 'f', data: 1, action: { type: 'void' } },
    );
    // iii's TriggerAction::Enqueue names its queue.
    expect(message({ type: 'invokefunction', function_id: 'f', data: 1, action: { type: 'enqueue', queue: 'jobs', x: 1 } })).toStrictEqual(
      { type: 'invokefunction', function_id: 'f', data: 1, action: { type: 'enqueue', queue: 'jobs' } },
    );
    for (const action of ['void', { kind: 'void' }, { type: 1 }, null, [{ type: 'void' }]]) {
      expect(message({ type: 'invokefunction', function_id: 'f', data: 1, action })).toStrictEqual({
        type: 'invokefunction',
        function_id: 'f',
        data: 1,
      });
    }
  });

  it('treats a null invocation_id as absent and drops null optionals', () => {
    expect(
      message({
        type: 'invokefunction',
        function_id: 'f',
        data: {},
        invocation_id: null,
        traceparent: null,
        baggage: null,
        metadata: null,
        stray: true,
      }),
    ).toStrictEqual({ type: 'invokefunction', function_id: 'f', data: {} });
  });

  it('rejects a non-string or empty invocation_id and a missing function_id', () => {
    const badId = invalidMessage('invokefunction "invocation_id" must be a string');
    expect(invalidReason({ type: 'invokefunction', function_id: 'f', invocation_id: 5 })).toStrictEqual(badId);
    expect(invalidReason({ type: 'invokefunction', function_id: 'f', invocation_id: '' })).toStrictEqual(badId);
    expect(invalidReason({ type: 'invokefunction', data: {} })).toStrictEqual(
      invalidMessage('invokefunction needs "function_id"'),
    );
  });
});

describe('decodeFrame: invocationresult', () => {
  const base = { type: 'invocationresult', invocation_id: 'inv-1', function_id: 'api::getUser' };

  it('keeps result, traceparent and baggage', () => {
    const frame = { ...base, result: { status_code: 200 }, traceparent: 'tp', baggage: 'b' };
    expect(message(frame)).toStrictEqual(frame);
  });

  it('has no result key when result is null or absent', () => {
    const fromNull = message({ ...base, result: null });
    expect(fromNull).toStrictEqual(base);
    expect('result' in fromNull).toBe(false);
    expect('result' in message(base)).toBe(false);
  });

  it('keeps falsy results other than null', () => {
    expect(message({ ...base, result: false })).toStrictEqual({ ...base, result: false });
    expect(message({ ...base, result: 0 })).toStrictEqual({ ...base, result: 0 });
    expect(message({ ...base, result: '' })).toStrictEqual({ ...base, result: '' });
  });

  it('decodes an error object with and without stacktrace', () => {
    expect(
      message({ ...base, error: { code: 'invocation_failed', message: 'boom', stacktrace: 'Error: boom\n at x' } }),
    ).toStrictEqual({
      ...base,
      error: { code: 'invocation_failed', message: 'boom', stacktrace: 'Error: boom\n at x' },
    });
    expect(message({ ...base, error: { code: 'function_not_found', message: 'Function not found' } })).toStrictEqual({
      ...base,
      error: { code: 'function_not_found', message: 'Function not found' },
    });
  });

  it('fills in a missing code, a missing message and drops a non-string stacktrace', () => {
    expect(message({ ...base, error: { message: 'boom', stacktrace: 5 } })).toStrictEqual({
      ...base,
      error: { code: 'unknown_error', message: 'boom' },
    });
    expect(message({ ...base, error: { code: '', message: 'boom' } })).toStrictEqual({
      ...base,
      error: { code: 'unknown_error', message: 'boom' },
    });
    expect(message({ ...base, error: { code: 'x' } })).toStrictEqual({
      ...base,
      error: { code: 'x', message: '{"code":"x"}' },
    });
  });

  it('turns a string error into a readable WireError', () => {
    expect(message({ ...base, error: 'something broke' })).toStrictEqual({
      ...base,
      error: { code: 'unknown_error', message: 'something broke' },
    });
    expect(message({ ...base, error: 42 })).toStrictEqual({ ...base, error: { code: 'unknown_error', message: '42' } });
  });

  it('refuses each string field over its length limit, and takes it at the limit', () => {
    const limits = [
      ['invocation_id', 256],
      ['function_id', 1024],
      ['traceparent', 256],
      ['baggage', 8192],
    ] as const;
    for (const [field, max] of limits) {
      expect(message({ ...base, [field]: 'x'.repeat(max) }), field).toMatchObject({ [field]: 'x'.repeat(max) });
      expect(invalidReason({ ...base, [field]: 'x'.repeat(max + 1) })).toStrictEqual(invalidMessage(`invocationresult "${field}" longer than ${max} characters`));
    }
    // The limits of other messages' fields hold too (registerfunction's id, a reattach token).
    expect(invalidReason({ type: 'registerfunction', id: 'f'.repeat(1025) })).toStrictEqual(invalidMessage('registerfunction "id" longer than 1024 characters'));
    expect(invalidReason({ type: 'reattach', previous_worker_id: 'w', reattach_token: 't'.repeat(257) })).toStrictEqual(invalidMessage('reattach "reattach_token" longer than 256 characters'));
  });

  it('treats a null error as no error', () => {
    expect(message({ ...base, result: 1, error: null })).toStrictEqual({ ...base, result: 1 });
  });

  it('defaults a missing function_id to an empty string', () => {
    expect(message({ type: 'invocationresult', invocation_id: 'inv-1' })).toStrictEqual({
      type: 'invocationresult',
      invocation_id: 'inv-1',
      function_id: '',
    });
  });

  it('rejects a missing invocation_id', () => {
    expect(invalidReason({ type: 'invocationresult', function_id: 'f', result: 1 })).toStrictEqual(
      invalidMessage('invocationresult needs "invocation_id"'),
    );
  });
});

describe('decodeFrame: reattach, registerservice, registertriggertype, unregistertriggertype, ping, pong', () => {
  it('decodes reattach with and without a token', () => {
    expect(message({ type: 'reattach', previous_worker_id: 'w1', reattach_token: 't1', x: 1 })).toStrictEqual({
      type: 'reattach',
      previous_worker_id: 'w1',
      reattach_token: 't1',
    });
    expect(message({ type: 'reattach', previous_worker_id: 'w1' })).toStrictEqual({
      type: 'reattach',
      previous_worker_id: 'w1',
    });
    expect(invalidReason({ type: 'reattach', reattach_token: 't1' })).toStrictEqual(
      invalidMessage('reattach needs "previous_worker_id"'),
    );
  });

  it('decodes registerservice with and without name and description', () => {
    expect(message({ type: 'registerservice', id: 's', name: 'svc', description: 'd', y: 2 })).toStrictEqual({
      type: 'registerservice',
      id: 's',
      name: 'svc',
      description: 'd',
    });
    expect(message({ type: 'registerservice', id: 's' })).toStrictEqual({ type: 'registerservice', id: 's' });
    expect(invalidReason({ type: 'registerservice' })).toStrictEqual(invalidMessage('registerservice needs "id"'));
  });

  it('decodes registertriggertype with and without description', () => {
    expect(message({ type: 'registertriggertype', id: 'cron', description: 'cron jobs' })).toStrictEqual({
      type: 'registertriggertype',
      id: 'cron',
      description: 'cron jobs',
    });
    expect(message({ type: 'registertriggertype', id: 'cron' })).toStrictEqual({
      type: 'registertriggertype',
      id: 'cron',
    });
    expect(invalidReason({ type: 'registertriggertype', description: 'x' })).toStrictEqual(
      invalidMessage('registertriggertype needs "id"'),
    );
  });

  it('decodes unregistertriggertype', () => {
    expect(message({ type: 'unregistertriggertype', id: 'cron', description: 'x' })).toStrictEqual({
      type: 'unregistertriggertype',
      id: 'cron',
    });
    expect(invalidReason({ type: 'unregistertriggertype' })).toStrictEqual(
      invalidMessage('unregistertriggertype needs "id"'),
    );
  });

  it('decodes ping and pong with no fields', () => {
    expect(message({ type: 'ping', at: 1 })).toStrictEqual({ type: 'ping' });
    expect(message('{"type":"pong"}')).toStrictEqual({ type: 'pong' });
  });
});

describe('decodeFrame: unknown, malformed and binary frames', () => {
  it('ignores unknown types, including engine-to-worker types and different casing', () => {
    expect(decodeFrame('{"type":"subscribe","topic":"x"}')).toStrictEqual({ kind: 'ignored', type: 'subscribe' });
    expect(decodeFrame('{"type":"workerregistered","worker_id":"w"}')).toStrictEqual({
      kind: 'ignored',
      type: 'workerregistered',
    });
    expect(decodeFrame('{"type":"RegisterFunction","id":"f"}')).toStrictEqual({
      kind: 'ignored',
      type: 'RegisterFunction',
    });
    expect(decodeFrame('{"type":""}')).toStrictEqual({ kind: 'ignored', type: '' });
  });

  it('reports invalid JSON with code invalid_json and the parser message', () => {
    for (const raw of ['', '{', '{"type":"ping"', 'not json', "{'type':'ping'}"]) {
      const result = decodeFrame(raw);
      expect(result.kind).toBe('invalid');
      if (result.kind !== 'invalid') continue;
      expect(result.code).toBe('invalid_json');
      expect(result.reason.length).toBeGreaterThan(0);
    }
  });

  it('reports a non-object frame', () => {
    for (const raw of ['[]', '[{"type":"ping"}]', '42', '"ping"', 'null', 'true']) {
      expect(decodeFrame(raw)).toStrictEqual(invalidMessage('frame is not a JSON object'));
    }
  });

  it('reports a missing or non-string type', () => {
    const reason = invalidMessage('frame has no string "type"');
    expect(decodeFrame('{}')).toStrictEqual(reason);
    expect(decodeFrame('{"id":"f"}')).toStrictEqual(reason);
    expect(decodeFrame('{"type":1}')).toStrictEqual(reason);
    expect(decodeFrame('{"type":null}')).toStrictEqual(reason);
    expect(decodeFrame('{"type":["ping"]}')).toStrictEqual(reason);
  });

  it('decodes a Buffer like the same text, including multi-byte UTF-8', () => {
    const text = JSON.stringify({ type: 'registerfunction', id: 'fn::größe', description: '日本語 ✓' });
    const fromBuffer = decodeFrame(Buffer.from(text, 'utf8'));
    expect(fromBuffer).toStrictEqual({
      kind: 'message',
      message: { type: 'registerfunction', id: 'fn::größe', description: '日本語 ✓' },
    });
    expect(fromBuffer).toStrictEqual(decodeFrame(text));
    expect(decodeFrame(Buffer.from('{"type":'))).toMatchObject({ kind: 'invalid', code: 'invalid_json' });
    expect(decodeFrame(Buffer.from('[1]'))).toStrictEqual(invalidMessage('frame is not a JSON object'));
  });

  it('keeps a "__proto__" key in config as plain data without touching prototypes', () => {
    const decoded = message('{"type":"registertrigger","id":"t","trigger_type":"http","function_id":"f","config":{"__proto__":{"polluted":true},"api_path":"/a"}}');
    expect(decoded.type).toBe('registertrigger');
    if (decoded.type !== 'registertrigger') return;
    expect(Object.prototype.hasOwnProperty.call(decoded.config, '__proto__')).toBe(true);
    expect(decoded.config.api_path).toBe('/a');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('decodeMessage accepts an already parsed value', () => {
    expect(decodeMessage({ type: 'ping' })).toStrictEqual({ kind: 'message', message: { type: 'ping' } });
    expect(decodeMessage(undefined)).toStrictEqual(invalidMessage('frame is not a JSON object'));
    expect(decodeMessage(null)).toStrictEqual(invalidMessage('frame is not a JSON object'));
  });
});

describe('decodeFrame properties', () => {
  const KNOWN_TYPES = [
    'registerfunction',
    'unregisterfunction',
    'registertrigger',
    'unregistertrigger',
    'invokefunction',
    'invocationresult',
    'reattach',
    'registerservice',
    'registertriggertype',
    'unregistertriggertype',
    'triggerregistrationresult',
    'ping',
    'pong',
  ] as const;

  /** The only keys a decoded message of each type may carry. */
  const ALLOWED_KEYS: Record<(typeof KNOWN_TYPES)[number], readonly string[]> = {
    registerfunction: ['type', 'id', 'description', 'request_format', 'response_format', 'metadata', 'invocation'],
    unregisterfunction: ['type', 'id'],
    registertrigger: ['type', 'id', 'trigger_type', 'function_id', 'config', 'metadata'],
    unregistertrigger: ['type', 'id', 'trigger_type'],
    invokefunction: ['type', 'invocation_id', 'function_id', 'data', 'traceparent', 'baggage', 'action', 'metadata'],
    invocationresult: ['type', 'invocation_id', 'function_id', 'result', 'error', 'traceparent', 'baggage'],
    reattach: ['type', 'previous_worker_id', 'reattach_token'],
    registerservice: ['type', 'id', 'name', 'description'],
    registertriggertype: ['type', 'id', 'description'],
    unregistertriggertype: ['type', 'id'],
    triggerregistrationresult: ['type', 'id', 'trigger_type', 'function_id', 'error'],
    ping: ['type'],
    pong: ['type'],
  };

  const isResult = (r: DecodeResult): boolean =>
    r.kind === 'message' || r.kind === 'ignored' || (r.kind === 'invalid' && typeof r.reason === 'string');

  it('never throws on arbitrary strings', () => {
    fc.assert(
      fc.property(fc.string(), (raw) => {
        expect(isResult(decodeFrame(raw))).toBe(true);
        expect(isResult(decodeFrame(Buffer.from(raw)))).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('never throws on arbitrary JSON values', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(isResult(decodeFrame(JSON.stringify(value)))).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('on frames of every known type with arbitrary fields: never throws, never outputs an unknown or undefined or null-for-optional key', () => {
    const fieldNames = fc.constantFrom(
      'id',
      'function_id',
      'trigger_type',
      'config',
      'metadata',
      'invocation_id',
      'data',
      'result',
      'error',
      'action',
      'previous_worker_id',
      'reattach_token',
      'description',
      'name',
      'traceparent',
      'baggage',
      'request_format',
      'response_format',
      'invocation',
      'message_type',
      'extra',
    );
    const frame = fc.record({
      type: fc.constantFrom(...KNOWN_TYPES),
      fields: fc.dictionary(fieldNames, fc.jsonValue(), { maxKeys: 10 }),
    });
    fc.assert(
      fc.property(frame, ({ type, fields }) => {
        const result = decodeFrame(JSON.stringify({ ...fields, type }));
        expect(result.kind === 'message' || result.kind === 'invalid').toBe(true);
        if (result.kind !== 'message') return;
        expect(result.message.type).toBe(type);
        for (const [key, value] of Object.entries(result.message)) {
          expect(ALLOWED_KEYS[type]).toContain(key);
          expect(value).not.toBeUndefined();
          // `data` defaults to null on purpose; every other optional is omitted rather than null.
          if (key !== 'data' && key !== 'config') expect(value).not.toBeNull();
        }
      }),
      { numRuns: 1000 },
    );
  });
});

describe('encode', () => {
  it('encodes workerregistered exactly, with and without reattach_token', () => {
    expect(encodeFrame({ type: 'workerregistered', worker_id: 'w-1', reattach_token: 't-1' })).toBe(
      '{"type":"workerregistered","worker_id":"w-1","reattach_token":"t-1"}',
    );
    expect(encodeFrame({ type: 'workerregistered', worker_id: 'w-1', reattach_token: undefined })).toBe(
      '{"type":"workerregistered","worker_id":"w-1"}',
    );
  });

  it('encodes triggerregistrationresult with and without error', () => {
    expect(
      encodeFrame({
        type: 'triggerregistrationresult',
        id: 't1',
        trigger_type: 'http',
        function_id: 'f',
        error: { code: 'invalid_trigger_config', message: 'bad' },
      }),
    ).toBe(
      '{"type":"triggerregistrationresult","id":"t1","trigger_type":"http","function_id":"f","error":{"code":"invalid_trigger_config","message":"bad"}}',
    );
    expect(
      encodeFrame({ type: 'triggerregistrationresult', id: 't1', trigger_type: 'http', function_id: 'f', error: undefined }),
    ).toBe('{"type":"triggerregistrationresult","id":"t1","trigger_type":"http","function_id":"f"}');
  });

  it('encodes pong', () => {
    expect(encodeFrame({ type: 'pong' })).toBe('{"type":"pong"}');
  });

  it('omits undefined optionals of invokefunction and invocationresult', () => {
    expect(
      encodeFrame({
        type: 'invokefunction',
        invocation_id: undefined,
        function_id: 'f',
        data: { a: 1 },
        traceparent: undefined,
        baggage: undefined,
        action: { type: 'void' },
      }),
    ).toBe('{"type":"invokefunction","function_id":"f","data":{"a":1},"action":{"type":"void"}}');
    expect(
      encodeFrame({
        type: 'invocationresult',
        invocation_id: 'i',
        function_id: 'f',
        result: undefined,
        error: undefined,
        traceparent: 'tp',
      }),
    ).toBe('{"type":"invocationresult","invocation_id":"i","function_id":"f","traceparent":"tp"}');
  });

  it('encodeInvocation produces the documented invokefunction frame', () => {
    const data = {
      path: '/users/42',
      method: 'GET',
      path_params: { id: '42' },
      query_params: { q: 'x' },
      headers: { 'content-type': 'application/json' },
      body: { a: 1 },
      trigger: { type: 'http', path: '/users/:id', method: 'GET' },
      context: {},
    };
    const encoded = encodeInvocation('3b952f96', 'api::getUser', JSON.stringify(data));
    expect(encoded).toBe(
      `{"type":"invokefunction","invocation_id":"3b952f96","function_id":"api::getUser","data":${JSON.stringify(data)}}`,
    );
    expect(JSON.parse(encoded)).toStrictEqual({
      type: 'invokefunction',
      invocation_id: '3b952f96',
      function_id: 'api::getUser',
      data,
    });
  });

  it('encodeInvocation escapes ids so the frame stays valid JSON', () => {
    const encoded = encodeInvocation('a"b\\c', 'fn"\n', 'null');
    expect(JSON.parse(encoded)).toStrictEqual({
      type: 'invokefunction',
      invocation_id: 'a"b\\c',
      function_id: 'fn"\n',
      data: null,
    });
  });

  it('encodeInvocationResult: ok with a value', () => {
    expect(encodeInvocationResult('i', 'f', { ok: true, value: { status_code: 200, body: { id: '42' } } })).toBe(
      '{"type":"invocationresult","invocation_id":"i","function_id":"f","result":{"status_code":200,"body":{"id":"42"}}}',
    );
  });

  it('encodeInvocationResult: ok with null or undefined has no result key; falsy values are kept', () => {
    expect(encodeInvocationResult('i', 'f', { ok: true, value: null })).toBe(
      '{"type":"invocationresult","invocation_id":"i","function_id":"f"}',
    );
    expect(encodeInvocationResult('i', 'f', { ok: true, value: undefined })).toBe(
      '{"type":"invocationresult","invocation_id":"i","function_id":"f"}',
    );
    expect(encodeInvocationResult('i', 'f', { ok: true, value: false })).toBe(
      '{"type":"invocationresult","invocation_id":"i","function_id":"f","result":false}',
    );
    expect(encodeInvocationResult('i', 'f', { ok: true, value: 0 })).toBe(
      '{"type":"invocationresult","invocation_id":"i","function_id":"f","result":0}',
    );
  });

  it('encodeInvocationResult: error with and without stacktrace, never a result key', () => {
    expect(
      encodeInvocationResult('i', 'f', {
        ok: false,
        error: { code: 'invocation_failed', message: 'boom', stacktrace: 'at x' },
      }),
    ).toBe(
      '{"type":"invocationresult","invocation_id":"i","function_id":"f","error":{"code":"invocation_failed","message":"boom","stacktrace":"at x"}}',
    );
    expect(
      encodeInvocationResult('i', 'f', { ok: false, error: { code: 'function_not_found', message: 'nope', stacktrace: undefined } }),
    ).toBe('{"type":"invocationresult","invocation_id":"i","function_id":"f","error":{"code":"function_not_found","message":"nope"}}');
  });

  it('types the errors the engine sends: a code outside WIRE_ERRORS does not compile unless relayed', () => {
    // Checked by `npm run typecheck`: removing the next line's directive makes it fail.
    // @ts-expect-error 'no_such_code' is not a registered wire code (src/errors.ts)
    const unregistered: EngineWireError = { code: 'no_such_code', message: 'm' };
    const registered: EngineWireError = { code: 'trigger_type_not_found', message: 'm' };
    expect(encodeInvocationResult('i', 'f', { ok: false, error: registered })).toContain('"code":"trigger_type_not_found"');
    expect(unregistered.code).toBe('no_such_code');
    const workersOwn = { code: 'workers_own', message: 'm' };
    // @ts-expect-error a worker's own code goes out only through relayed()
    expect(encodeInvocationResult('i', 'f', { ok: false, error: workersOwn })).toContain('workers_own');
    expect(encodeInvocationResult('i', 'f', { ok: false, error: relayed(workersOwn) })).toContain('workers_own');
  });

  it('round-trips: what the engine encodes for a worker, the decoder reads back', () => {
    const encoded = encodeInvocationResult('i', 'f', { ok: false, error: relayed({ code: 'c', message: 'm' }) });
    expect(decodeFrame(encoded)).toStrictEqual({
      kind: 'message',
      message: { type: 'invocationresult', invocation_id: 'i', function_id: 'f', error: { code: 'c', message: 'm' } },
    });
    expect(decodeFrame(encodeInvocation('i', 'f', '{"x":[1,2]}'))).toStrictEqual({
      kind: 'message',
      message: { type: 'invokefunction', invocation_id: 'i', function_id: 'f', data: { x: [1, 2] } },
    });
  });
});

describe('jsonString', () => {
  it('writes every string exactly as JSON.stringify does', () => {
    const cases = ['', 'bench::f0', '3b952f96-0a1b-4c2d-8e3f-0123456789ab', 'a"b', 'a\\b', 'line\nbreak', '\u0000', '\u007f', 'é', '\ud800', '\udc00x', '😀', 'x'.repeat(256), `${'x'.repeat(256)}"`];
    for (const value of cases) expect(jsonString(value), JSON.stringify(value)).toBe(JSON.stringify(value));
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 300 }), fc.string({ maxLength: 40, unit: 'binary' }), fc.string({ maxLength: 40, unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)) })), (value) => {
        expect(jsonString(value)).toBe(JSON.stringify(value));
      }),
      { numRuns: 3000 },
    );
  });
});
