import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { mapApiResponse } from '../../src/http/response.js';
import { BODY_BYTES_MIN, decodeKeepingBody, untouchedBody } from '../../src/protocol/answer-body.js';
import { canonicalContainerEnd } from '../../src/protocol/canonical-json.js';
import { decodeFrame, type DecodeResult } from '../../src/protocol/decode.js';

/** Strings with what JSON escapes: quotes, backslashes, every kind of control, lone surrogates, non-ASCII. */
const tricky = fc.string({ unit: fc.oneof(fc.constantFrom('"', '\\', '/', '\b', '\t', '\n', '\f', '\r', '\u0000', '\u001f', '\u007f', '\u2028', 'é', '😀', '\ud800', 'body', 'result'), fc.string({ maxLength: 1 })) });
const numbers = fc.oneof(fc.integer(), fc.double({ noNaN: true }), fc.constantFrom(-0, 1e21, 1e-7, 123456789012345680000, 0.1, 5e-324));
const key = fc.oneof(tricky, fc.constantFrom('0', '1', '10', '01', '__proto__', 'body', 'result', ''));
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  v: fc.oneof({ depthSize: 'small' }, tricky, numbers, fc.boolean(), fc.constant(null), fc.array(tie('v'), { maxLength: 4 }), fc.dictionary(key, tie('v'), { maxKeys: 4 })),
})).v;
const container = fc.oneof(fc.array(value, { maxLength: 5 }), fc.dictionary(key, value, { maxKeys: 5 }));

/** JSON text of a container, then edited so that it may no longer be canonical (or valid). */
const JSONISH = ['{', '}', '[', ']', '"', ':', ',', ' ', '\n', '0', '-', '1', '.', 'e', 'E', '+', '\\', 'u', '/', 'n', 'é', '\u0001', '"0"', '"a"', '\\u0041', '\\u001F', '\\u001f', '\\b', '\\u0008', '1.0', '-0', '1e2'];
const edited = container.chain((v) =>
  fc.array(fc.tuple(fc.nat(), fc.constantFrom('delete', 'insert', 'replace'), fc.constantFrom(...JSONISH)), { maxLength: 3 }).map((edits) => {
    let out = JSON.stringify(v);
    for (const [at, kind, c] of edits) {
      const i = at % (out.length + 1);
      if (kind === 'delete') out = out.slice(0, i) + out.slice(i + 1);
      else if (kind === 'insert') out = out.slice(0, i) + c + out.slice(i);
      else out = out.slice(0, i) + c + out.slice(i + 1);
    }
    return out;
  }),
);

const hasDigitKey = (v: unknown): boolean =>
  Array.isArray(v) ? v.some(hasDigitKey) : typeof v === 'object' && v !== null && Object.entries(v).some(([k, x]) => /^\d+$/.test(k) || hasDigitKey(x));

const reserialised = (text: string): string | undefined => {
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return undefined;
  }
};

describe('canonicalContainerEnd', () => {
  it('accepts only text that JSON.stringify(JSON.parse(text)) writes back byte for byte', () => {
    fc.assert(
      fc.property(edited, (text) => {
        const bytes = Buffer.from(text);
        if (canonicalContainerEnd(bytes, 0) === bytes.length) {
          expect(bytes.toString('utf8')).toBe(reserialised(bytes.toString('utf8')));
        }
      }),
      { numRuns: 20000 },
    );
  });

  it('accepts what JSON.stringify writes, unless a key is digits only (JSON.parse reorders those) or it escapes a lone surrogate', () => {
    fc.assert(
      fc.property(container, (v) => {
        const text = JSON.stringify(v);
        // A lone surrogate is written escaped (\ud800): refused, which is always safe (the long way is taken).
        if (!hasDigitKey(v) && !/\\ud[89a-f]/.test(text)) expect(canonicalContainerEnd(Buffer.from(text), 0)).toBe(Buffer.byteLength(text));
      }),
      { numRuns: 5000 },
    );
  });

  it('refuses duplicate keys, whitespace, non-canonical escapes and numbers, and nesting past its limit', () => {
    for (const text of ['{"a":1,"a":2}', '{"a":{"b":1,"b":1}}', '[ 1]', '{"a" :1}', '["\\/"]', '["\\u0041"]', '["\\u001F"]', '["\\u0008"]', '[1.0]', '[-0]', '[1e2]', '[1E+21]', '[1e400]', '[12345678901234567890]', '{"1":1}', '{"01":1}', '[01]', '[1,]', '[']) {
      expect([text, canonicalContainerEnd(Buffer.from(text), 0)]).toEqual([text, -1]);
    }
    for (const text of ['{"a":1,"b":{"a":2}}', '[{"a":1},{"a":1}]', '["\\u001f\\b\\"\\\\"]', '[1e+21,0.1,-5,5e-324]', '{"__proto__":1}', '{"":[]}', '{"a1":1}']) {
      expect([text, canonicalContainerEnd(Buffer.from(text), 0)]).toEqual([text, Buffer.byteLength(text)]);
    }
    expect(canonicalContainerEnd(Buffer.from('['.repeat(256) + ']'.repeat(256)), 0)).toBe(512);
    expect(canonicalContainerEnd(Buffer.from('['.repeat(257) + ']'.repeat(257)), 0)).toBe(-1);
  });

  it('finds a duplicate key among many, and tells apart two keys of the same hash', () => {
    const wide = Array.from({ length: 200 }, (_, k) => `"k${String(k).padStart(3, '0')}":${k}`);
    const distinct = `{${wide.join(',')}}`;
    expect(canonicalContainerEnd(Buffer.from(distinct), 0)).toBe(distinct.length);
    const repeated = `{${wide.join(',')},"k123":0}`;
    expect(canonicalContainerEnd(Buffer.from(repeated), 0)).toBe(-1);
    // "glbvs" and "yacxa" have the same 32-bit FNV-1a hash: both kept, either twice refused.
    expect(canonicalContainerEnd(Buffer.from('{"glbvs":1,"yacxa":2}'), 0)).toBe(21);
    expect(canonicalContainerEnd(Buffer.from('{"glbvs":1,"yacxa":2,"glbvs":3}'), 0)).toBe(-1);
    expect(canonicalContainerEnd(Buffer.from('{"":1,"":2}'), 0)).toBe(-1);
  });

  it('compares key bytes only when hashes match, not with every earlier key (a wide object cost a walk of its keys per key)', () => {
    const members = Array.from({ length: 255 }, (_, k) => `"k${String(k).padStart(3, '0')}":0`);
    const text = `[${Array(20).fill(`{${members.join(',')}}`).join(',')}]`;
    const compare = vi.spyOn(Buffer.prototype, 'compare');
    try {
      expect(canonicalContainerEnd(Buffer.from(text), 0)).toBe(text.length);
      // Before: 255 · 254 / 2 byte comparisons per object, 20 objects.
      expect(compare.mock.calls.length).toBeLessThan(20);
    } finally {
      compare.mockRestore();
    }
  });
});

/** What the HTTP reply carries for a decoded frame: status, headers and body bytes, or the mapping's refusal. */
function httpOf(decoded: DecodeResult): unknown {
  if (decoded.kind !== 'message') return decoded;
  const message = decoded.message;
  if (message.type !== 'invocationresult') return message;
  if (message.error !== undefined) return { error: message.error };
  const mapped = mapApiResponse(message.result);
  if (!mapped.ok) return mapped;
  const { status, headers, body } = mapped.reply;
  return { status, headers, body: body === undefined ? undefined : Buffer.from(body).toString('hex') };
}

const PAD = 'p'.repeat(BODY_BYTES_MIN);

/** Answer frames of many shapes: key orders, padding before and after, duplicate and escaped keys, nested "body" keys, whitespace. */
const frame = fc
  .record({
    body: fc.oneof(container.map((v) => JSON.stringify(v)), edited, fc.constantFrom('"text"', 'null', '{"body":{"body":1}}', `{"pad":"${PAD}"}`)),
    status: fc.constantFrom('200', '201', '204', '304', '"200"', '700'),
    headers: fc.constantFrom('{}', '{"content-type":"text/plain"}', '{"Content-Type":"application/json"}', '["x-a: 1"]'),
    order: fc.constantFrom('type-first', 'result-first'),
    extraResult: fc.constantFrom('', ',"result":{"body":[1]}', ',"result":null'),
    extraBody: fc.constantFrom('', ',"body":[2]', ',"b\\u006fdy":[3]', ',"nested":{"body":[4]}'),
    space: fc.constantFrom('', ' ', '\n\t'),
    padWhere: fc.constantFrom('top', 'result', 'body-after'),
    escapedResultKey: fc.boolean(),
  })
  .map(({ body, status, headers, order, extraResult, extraBody, space: s, padWhere, escapedResultKey }) => {
    const pad = `"pad":"${PAD}"`;
    const resultKey = escapedResultKey ? '"r\\u0065sult"' : '"result"';
    const result = `{${s}"status_code"${s}:${s}${status},"headers":${headers},${padWhere === 'result' ? `${pad},` : ''}"body":${s}${body}${s}${extraBody}${padWhere === 'body-after' ? `,${pad}` : ''}}`;
    const head = `"type":"invocationresult","invocation_id":"i-1","function_id":"f"`;
    const top = order === 'type-first' ? `${head},${resultKey}:${result}` : `${resultKey}:${s}${result},${head}`;
    return `{${s}${top}${extraResult}${padWhere === 'top' ? `,${pad}` : ''}${s}}`;
  });

describe('decodeKeepingBody', () => {
  it('gives the same HTTP reply, byte for byte, as decoding the frame and serialising its body', () => {
    let kept = 0;
    fc.assert(
      fc.property(frame, (text) => {
        const raw = Buffer.from(text);
        const fast = decodeKeepingBody(raw);
        if (fast !== undefined) kept++;
        expect(httpOf(fast ?? decodeFrame(raw))).toStrictEqual(httpOf(decodeFrame(raw)));
      }),
      { numRuns: 4000 },
    );
    // The shortcut is taken often enough for this to test it.
    expect(kept).toBeGreaterThan(50);
  });

  it('reads as the decoded frame does, for whoever reads the body; reading or replacing it forgets the bytes', () => {
    fc.assert(
      fc.property(container, (v) => {
        const body = { v, pad: PAD };
        const raw = Buffer.from(JSON.stringify({ type: 'invocationresult', invocation_id: 'i', function_id: 'f', result: { status_code: 200, body, after: 1 } }));
        const fast = decodeKeepingBody(raw);
        if (fast === undefined) return; // a digit-only key somewhere in v
        const slow = decodeFrame(raw);
        const result = (fast.kind === 'message' && fast.message.type === 'invocationresult' ? fast.message.result : undefined) as Record<string, unknown>;
        expect(untouchedBody(result)?.toString()).toBe(JSON.stringify(body));
        expect(Object.keys(result)).toEqual(['status_code', 'body', 'after']);
        expect(JSON.stringify(fast)).toBe(JSON.stringify(slow));
        expect(untouchedBody(result)).toBeUndefined();
      }),
      { numRuns: 300 },
    );
    const raw = Buffer.from(JSON.stringify({ type: 'invocationresult', invocation_id: 'i', function_id: 'f', result: { body: { n: 1, pad: PAD } } }));
    const read = decodeKeepingBody(raw);
    const result = (read?.kind === 'message' && read.message.type === 'invocationresult' ? read.message.result : undefined) as { body: { n: number } };
    result.body.n = 2;
    expect(mapApiResponse(result)).toMatchObject({ ok: true, reply: { body: JSON.stringify({ n: 2, pad: PAD }) } });
    const replaced = decodeKeepingBody(raw);
    const other = (replaced?.kind === 'message' && replaced.message.type === 'invocationresult' ? replaced.message.result : undefined) as { body: unknown };
    other.body = [1];
    expect(mapApiResponse(other)).toMatchObject({ ok: true, reply: { body: '[1]' } });
  });

  it('leaves small frames, frames with no body and frames that are not UTF-8 to decodeFrame', () => {
    expect(decodeKeepingBody(Buffer.from('{"type":"invocationresult","invocation_id":"i","result":{"body":[1]}}'))).toBeUndefined();
    expect(decodeKeepingBody(Buffer.from(`{"type":"invocationresult","invocation_id":"i","result":{"x":"${PAD}"}}`))).toBeUndefined();
    const notUtf8 = Buffer.concat([Buffer.from(`{"type":"invocationresult","invocation_id":"i","result":{"body":["${PAD}`), Buffer.from([0xff]), Buffer.from('"]}}')]);
    expect(decodeKeepingBody(notUtf8)).toBeUndefined();
  });
});
