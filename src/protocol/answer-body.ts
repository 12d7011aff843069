import { isUtf8 } from 'node:buffer';
import { canonicalContainerEnd } from './canonical-json.js';
import { decodeFrame, type DecodeResult } from './decode.js';

/**
 * A worker's large answer, decoded without its body (issue 26 point 6). A handler that echoes or
 * builds a 64 KiB document answers `{"type":"invocationresult",…,"result":{…,"body":<document>}}`;
 * decoding the frame made its text and its whole parsed value, and the HTTP reply serialised the body
 * again: ~360 KB of garbage per request, most of a child's on that row. When the body is an array or
 * an object written exactly as JSON.stringify would write it (canonical-json.ts), its bytes are the
 * HTTP body as they are: the frame is decoded with `null` in the body's place, and the result's `body`
 * becomes an accessor that parses the bytes the first time anything reads it (middleware, forwarding,
 * a span): from then on the parsed value is the body and the bytes are forgotten, so whoever reads
 * or changes it sees what they would have. mapApiResponse asks `untouchedBody` first and sends the
 * bytes when they are still the body.
 *
 * Any frame this does not recognise for certain (a key with an escape where `result` or `body` is
 * looked for, either key twice, a body that is not canonical, bytes that are not UTF-8, a frame that
 * is not valid JSON) is decoded the usual way.
 */
export const BODY_BYTES_MIN = 8 * 1024;

const UNTOUCHED = Symbol('answer body bytes');
type Holder = { bytes: Buffer | undefined };

/** The answer's body bytes, if the body is still exactly them (never read, never replaced). */
export function untouchedBody(result: Record<string, unknown>): Buffer | undefined {
  return (result as { [UNTOUCHED]?: Holder })[UNTOUCHED]?.bytes;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const RESULT = Buffer.from('"result"');
const BODY = Buffer.from('"body"');

function skipSpace(bytes: Buffer, from: number): number {
  let i = from;
  for (;;) {
    const c = bytes[i];
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return i;
    i++;
  }
}

/** The string opening at `from`: where it ends, or -1; `escaped` says whether it held a backslash. */
function stringEnd(bytes: Buffer, from: number, escaped: { seen: boolean }): number {
  const end = bytes.length;
  for (let i = from + 1; i < end; i++) {
    const c = bytes[i];
    if (c === QUOTE) return i + 1;
    if (c === BACKSLASH) {
      escaped.seen = true;
      i++;
    }
  }
  return -1;
}

/**
 * Where the value starting at `from` ends, for any value JSON.parse accepts (strings and brackets
 * followed as JSON does; scalars up to the next delimiter). It need not validate: what is skipped
 * here is parsed by JSON.parse afterwards.
 */
function valueEnd(bytes: Buffer, from: number): number {
  const escaped = { seen: false };
  const first = bytes[from];
  if (first === QUOTE) return stringEnd(bytes, from, escaped);
  if (first !== OPEN_OBJECT && first !== OPEN_ARRAY) {
    let i = from;
    for (;;) {
      const c = bytes[i];
      if (c === undefined || c === COMMA || c === CLOSE_OBJECT || c === CLOSE_ARRAY || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) return i === from ? -1 : i;
      i++;
    }
  }
  let depth = 0;
  for (let i = from; i < bytes.length; i++) {
    const c = bytes[i];
    if (c === QUOTE) {
      i = stringEnd(bytes, i, escaped) - 1;
      if (i < 0) return -1;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      depth++;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      if (--depth === 0) return i + 1;
    }
  }
  return -1;
}

/**
 * Walks the members of the object opening at `from`, calling `member` with each key's span and
 * where its value starts; `member` returns where the value ends (or -1 to give up). Returns where the
 * object ends, or -1.
 */
function members(bytes: Buffer, from: number, member: (keyStart: number, keyEnd: number, valueStart: number) => number): number {
  if (bytes[from] !== OPEN_OBJECT) return -1;
  let i = skipSpace(bytes, from + 1);
  if (bytes[i] === CLOSE_OBJECT) return i + 1;
  for (;;) {
    if (bytes[i] !== QUOTE) return -1;
    const escaped = { seen: false };
    const keyEnd = stringEnd(bytes, i, escaped);
    // An escaped key may spell `result` or `body`: not recognised for certain.
    if (keyEnd < 0 || escaped.seen) return -1;
    const colon = skipSpace(bytes, keyEnd);
    if (bytes[colon] !== COLON) return -1;
    const valueStart = skipSpace(bytes, colon + 1);
    const end = member(i, keyEnd, valueStart);
    if (end < 0) return -1;
    i = skipSpace(bytes, end);
    if (bytes[i] === CLOSE_OBJECT) return i + 1;
    if (bytes[i] !== COMMA) return -1;
    i = skipSpace(bytes, i + 1);
  }
}

const isKey = (bytes: Buffer, start: number, end: number, key: Buffer): boolean => end - start === key.length && bytes.compare(key, 0, key.length, start, end) === 0;

/** Where the answer's `result.body` is: [start, end), or undefined when not recognised for certain. */
function bodySpan(raw: Buffer): [number, number] | undefined {
  let results = 0;
  let bodies = 0;
  let span: [number, number] | undefined;
  const start = skipSpace(raw, 0);
  const end = members(raw, start, (keyStart, keyEnd, valueStart) => {
    if (!isKey(raw, keyStart, keyEnd, RESULT)) return valueEnd(raw, valueStart);
    results++;
    if (raw[valueStart] !== OPEN_OBJECT) return valueEnd(raw, valueStart);
    return members(raw, valueStart, (k, ke, v) => {
      if (!isKey(raw, k, ke, BODY)) return valueEnd(raw, v);
      bodies++;
      const bodyEnd = canonicalContainerEnd(raw, v);
      if (bodyEnd >= 0) span = [v, bodyEnd];
      return bodyEnd;
    });
  });
  if (end < 0 || skipSpace(raw, end) !== raw.length || results !== 1 || bodies !== 1) return undefined;
  return span;
}

/**
 * The frame decoded with its answer's body left as bytes (see above), or undefined: then decode it the
 * usual way (decodeFrame).
 */
export function decodeKeepingBody(raw: Buffer): DecodeResult | undefined {
  // Large frames of other kinds (a worker's call with a large payload) skip the walk: memchr-fast.
  if (raw.length < BODY_BYTES_MIN || raw.indexOf(BODY) < 0) return undefined;
  const span = bodySpan(raw);
  if (span === undefined || !isUtf8(raw)) return undefined;
  const [start, end] = span;
  const decoded = decodeFrame(`${raw.toString('utf8', 0, start)}null${raw.toString('utf8', end)}`);
  if (decoded.kind !== 'message' || decoded.message.type !== 'invocationresult') return undefined;
  const result = decoded.message.result as Record<string, unknown> | undefined;
  // The null must be where the body was: anything else means the walk misread the frame.
  if (result === undefined || result === null || typeof result !== 'object' || Array.isArray(result) || result.body !== null) return undefined;
  keepBody(result, raw.subarray(start, end));
  return decoded;
}

/** `result.body` becomes the bytes, parsed when first read; assigning it replaces them. */
function keepBody(result: Record<string, unknown>, bytes: Buffer): void {
  const holder: Holder = { bytes };
  let value: unknown;
  Object.defineProperty(result, 'body', {
    enumerable: true,
    configurable: true,
    get(): unknown {
      if (holder.bytes !== undefined) {
        value = JSON.parse(holder.bytes.toString('utf8'));
        holder.bytes = undefined;
      }
      return value;
    },
    set(next: unknown) {
      holder.bytes = undefined;
      value = next;
    },
  });
  Object.defineProperty(result, UNTOUCHED, { value: holder, enumerable: false });
}
