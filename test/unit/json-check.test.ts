import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { decodeBody, MAX_JSON_DEPTH } from '../../src/http/body.js';
import { checkJson } from '../../src/protocol/json-check.js';

/**
 * JSON.parse's verdict, with the depth rule of checkJson (arrays and objects open at once), on text as
 * the body's bytes decode to (checkJson reads the bytes; the tests hand it Buffer.from(text), and
 * Buffer.from turns a lone surrogate into U+FFFD, which is allowed exactly where the surrogate is).
 */
function reference(text: string, maxDepth: number): 'ok' | 'invalid' | 'too_deep' {
  try {
    JSON.parse(text);
  } catch {
    return 'invalid';
  }
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '[' || c === '{') deepest = Math.max(deepest, ++depth);
    else if (c === ']' || c === '}') depth--;
  }
  return deepest > maxDepth ? 'too_deep' : 'ok';
}

/** Characters that matter to JSON's grammar, and a few that must not appear where they do. */
const JSONISH = [...'{}[]":,0123456789-+.eE truefalsn\\/bu\t\n\r\u0000\u001f\u007f\u2028\ud800\udc00é\ufeffAx'];

/** Edits a text at random: delete, insert or replace one character, a few times. */
const mutated = (text: string): fc.Arbitrary<string> =>
  fc
    .array(fc.tuple(fc.nat(), fc.constantFrom('delete', 'insert', 'replace'), fc.constantFrom(...JSONISH)), { minLength: 1, maxLength: 4 })
    .map((edits) => {
      let out = text;
      for (const [at, kind, c] of edits) {
        const i = out.length === 0 ? 0 : at % (out.length + (kind === 'insert' ? 1 : 0));
        if (kind === 'delete') out = out.slice(0, i) + out.slice(i + 1);
        else if (kind === 'insert') out = out.slice(0, i) + c + out.slice(i);
        else out = out.slice(0, i) + c + out.slice(i + 1);
      }
      return out;
    });

/** JSON text with whitespace of every allowed kind between tokens. */
const spaced = (value: unknown): fc.Arbitrary<string> =>
  fc.constantFrom(' ', '\t', '\n', '\r', '', '  \n').map((ws) => JSON.stringify(value, null, ws === '' ? undefined : ws));

describe('checkJson', () => {
  it('accepts what JSON.stringify writes, with any allowed whitespace', () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ maxDepth: 6 }).chain((v) => spaced(v)),
        (text) => {
          expect(checkJson(Buffer.from(text), 64)).toBe('ok');
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('agrees with JSON.parse on JSON text edited at random', () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ maxDepth: 4 }).chain((v) => mutated(JSON.stringify(v))),
        (text) => {
          expect(checkJson(Buffer.from(text), 64)).toBe(reference(text, 64));
        },
      ),
      { numRuns: 5000 },
    );
  });

  it("agrees with JSON.parse on strings of JSON's own characters", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...JSONISH), { maxLength: 24 }).map((cs) => cs.join('')), (text) => {
        expect(checkJson(Buffer.from(text), 64)).toBe(reference(text, 64));
      }),
      { numRuns: 20000 },
    );
  });

  it('agrees with JSON.parse on numbers, literals and escapes, valid or nearly', () => {
    const cases = [
      '0', '-0', '01', '-', '1.', '.5', '1.5', '1e', '1e+', '1E-2', '1e5x', '-01', '00', '1.2.3', '2e308', '-1e-400',
      'true', 'tru', 'truee', 'false', 'null', 'nul', 'NaN', 'Infinity', '+1',
      '"\\u00e9"', '"\\u00g9"', '"\\u00e"', '"\\x41"', '"\\/"', '"\\b\\f\\n\\r\\t"', '"\\"', '"a\u0001"', '"\t"', '"\u007f"',
      '"\ud800"', '"\u2028"', '\ufeff1', ' 1 ', '1 2', '[1,]', '[,1]', '{"a":1,}', '{"a" 1}', '{a:1}', '{"a":1 "b":2}', '[]]', '[[]', '{}', '[]', '',
    ];
    for (const text of cases) expect([text, checkJson(Buffer.from(text), 64)]).toEqual([text, reference(text, 64)]);
  });

  it('agrees with JSON.parse of the decoded text on any bytes, invalid UTF-8 included', () => {
    // Bytes that matter to the grammar, and the lead, continuation and invalid bytes of UTF-8.
    const BYTES = [...'{}[]":,0-1e.tfnul\\u \n'].map((c) => c.charCodeAt(0)).concat([0x00, 0x1f, 0x7f, 0x80, 0xbf, 0xc2, 0xc3, 0xa9, 0xe2, 0x80, 0xa8, 0xed, 0xa0, 0xf0, 0x9f, 0xf4, 0xf5, 0xff]);
    fc.assert(
      fc.property(
        fc.oneof(
          fc.array(fc.constantFrom(...BYTES), { maxLength: 24 }).map((bs) => Buffer.from(bs)),
          fc.tuple(fc.jsonValue({ maxDepth: 3 }), fc.nat(), fc.constantFrom(...BYTES)).map(([v, at, b]) => {
            const bytes = Buffer.from(JSON.stringify(v));
            if (bytes.length > 0) bytes[at % bytes.length] = b;
            return bytes;
          }),
        ),
        (bytes) => {
          expect(checkJson(bytes, 64)).toBe(reference(bytes.toString('utf8'), 64));
        },
      ),
      { numRuns: 20000 },
    );
  });

  it('tells nesting deeper than the limit from invalid text, as the old depth rule did', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom('[', '{"k":'), { minLength: 1, maxLength: 8 }), fc.boolean(), (opens, broken) => {
        const closes = opens.map((o) => (o === '[' ? ']' : '}')).reverse().join('');
        const text = `${opens.join('')}1${broken ? closes.slice(1) : closes}`;
        expect(checkJson(Buffer.from(text), 4)).toBe(reference(text, 4));
      }),
      { numRuns: 2000 },
    );
  });
});

describe('decodeBody with checkJson', () => {
  afterEach(() => vi.restoreAllMocks());

  it('checks a JSON body without parsing it (the parse allocated the whole document again per request)', () => {
    const parse = vi.spyOn(JSON, 'parse');
    const text = JSON.stringify({ items: Array.from({ length: 50 }, (_, i) => ({ sku: `S-${i}`, qty: i, tags: ['a'] })) });
    expect(decodeBody(Buffer.from(text), 'application/json')).toStrictEqual({ ok: true, json: Buffer.from(text) });
    expect(decodeBody(Buffer.from(`${text}x`), 'application/json')).toStrictEqual({ ok: false, code: 'INVALID_JSON' });
    expect(parse).not.toHaveBeenCalled();
  });

  it('keeps valid UTF-8 as its bytes (never decoded), and anything else as the text it decodes to, as before', () => {
    const toString = vi.spyOn(Buffer.prototype, 'toString');
    const utf8 = Buffer.from('{"name":"Zoë","note":"\u2028 ☃ 😀"}');
    const decoded = decodeBody(utf8, 'application/json');
    expect(decoded).toStrictEqual({ ok: true, json: utf8 });
    expect(toString).not.toHaveBeenCalled();
    // A lone surrogate's bytes (CESU-8) and a stray continuation byte are not UTF-8: their text has U+FFFD.
    const invalid = Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xed, 0xa0, 0x80, 0x80]), Buffer.from('"}')]);
    expect(decodeBody(invalid, 'application/json')).toStrictEqual({ ok: true, json: invalid.toString('utf8') });
    expect(invalid.toString('utf8')).toContain('\ufffd');
  });

  it('still refuses nesting deeper than MAX_JSON_DEPTH with its own message', () => {
    const deep = '['.repeat(MAX_JSON_DEPTH + 1) + ']'.repeat(MAX_JSON_DEPTH + 1);
    expect(decodeBody(Buffer.from(deep), 'application/json')).toStrictEqual({
      ok: false,
      code: 'INVALID_JSON',
      message: `Request body JSON is nested deeper than ${MAX_JSON_DEPTH} levels`,
    });
  });
});
