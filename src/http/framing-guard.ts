import { HTTP_TOKEN } from '../values.js';
/**
 * A strict reading of HTTP/1.1 request framing, kept beside Node's parser on every connection
 * (docs/http.md#framing). Node's parser accepts forms that a front proxy may read differently
 * (`Transfer-Encoding:\tchunked`, `CHUNKED`, `identity, chunked`, a request line with two spaces):
 * behind such a proxy one side sees a body where the other sees the next request, which is how
 * requests are smuggled. The guard follows the byte stream request by request (head, then the body
 * by its Content-Length or its chunks) and names the offset of the first request it refuses; the
 * server hands Node only the bytes before it.
 *
 * Pure: no sockets. The guard never stops following a connection: whatever it cannot follow (a head
 * over the header-block limit, a malformed header line or chunk, a length too large to count) it
 * refuses itself, and after a protocol upgrade or CONNECT — whose bytes are not HTTP requests — any
 * further byte on the connection is refused.
 */
export type GuardVerdict = { ok: true } | { ok: false; offset: number; reason: string; code: 'MALFORMED_REQUEST' | 'HEADERS_TOO_LARGE' };

type State =
  | { kind: 'head' }
  | { kind: 'body'; remaining: number }
  | { kind: 'chunk-size' }
  | { kind: 'chunk-data'; remaining: number }
  | { kind: 'chunk-end' }
  | { kind: 'trailers'; lines: number }
  /** After an upgrade or CONNECT: no further request is read on the connection. */
  | { kind: 'closed' };

/**
 * The header block's one limit (docs/security.md#limits): the request line and every header line
 * together, and their number. Node's own maxHeaderSize (http-server.ts) is the same byte count.
 */
export const MAX_HEAD_BYTES = 16 * 1024;
/** Header lines per request (hyper's default in iii; trailers count against it too). */
export const MAX_HEADER_COUNT = 100;
const MAX_LINE_BYTES = 1024;
/** 2^48 - 1: the largest chunk the guard counts (a chunk size of more than 12 hex digits is refused). */
const MAX_CHUNK_HEX_DIGITS = 12;
const TOKEN = HTTP_TOKEN;
const HEX = /^[0-9A-Fa-f]+$/;
/** Field values: visible characters, spaces and tabs, obs-text; no CR, LF or NUL. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** What a byte may be: a token character (RFC 9110), a field-value character (FIELD_VALUE). */
const IS_TOKEN = new Uint8Array(256);
const IS_FIELD_VALUE = new Uint8Array(256);
for (let byte = 0; byte < 256; byte++) {
  IS_TOKEN[byte] = TOKEN.test(String.fromCharCode(byte)) ? 1 : 0;
  IS_FIELD_VALUE[byte] = FIELD_VALUE.test(String.fromCharCode(byte)) ? 1 : 0;
}
/** The header names the guard reads (lower case), as bytes. */
const TRANSFER_ENCODING = Buffer.from('transfer-encoding');
const CONTENT_LENGTH_NAME = Buffer.from('content-length');
const HOST = Buffer.from('host');
const UPGRADE = Buffer.from('upgrade');
const CONNECTION = Buffer.from('connection');
const CHUNKED = Buffer.from('chunked');
const HTTP_1 = Buffer.from('HTTP/1.');
const CONNECT = Buffer.from('CONNECT ');
const CR = 0x0d;
const LF = 0x0a;
const SPACE = 0x20;
const HEAD_END = Buffer.from('\r\n\r\n');
const LINE_END = Buffer.from('\r\n');
const OK: GuardVerdict = { ok: true };
/** The states without a count share one object each (a new one per request showed in allocation profiles). */
const HEAD: State = Object.freeze({ kind: 'head' });
const CLOSED: State = Object.freeze({ kind: 'closed' });

export class FramingGuard {
  private state: State = HEAD;
  /** The start of a head or line that the previous chunk ended inside. */
  private carry: Buffer | undefined;
  /** Where the request being read began in the data of this scan (undefined: in an earlier chunk). */
  private messageStart: number | undefined;
  /** The request being read is an upgrade or CONNECT: nothing may follow it. */
  private upgraded = false;

  scan(chunk: Buffer): GuardVerdict {
    // `data` is the carried bytes and the chunk; `base` maps an index of `data` to one of `chunk`.
    const carried = this.carry;
    this.carry = undefined;
    const data = carried === undefined ? chunk : Buffer.concat([carried, chunk]);
    const base = carried === undefined ? 0 : -carried.length;
    this.messageStart = undefined;
    let i = 0;
    while (i < data.length) {
      const state = this.state;
      if (state.kind === 'closed') return refuse(at(i, base), 'bytes after a protocol upgrade or CONNECT request');
      if (state.kind === 'body' || state.kind === 'chunk-data') {
        const take = Math.min(state.remaining, data.length - i);
        i += take;
        state.remaining -= take;
        if (state.remaining === 0) this.state = state.kind === 'body' ? this.afterMessage() : { kind: 'chunk-end' };
        continue;
      }
      if (state.kind === 'head') {
        // Empty lines before a request line are tolerated (RFC 9112 §2.2), as Node does.
        while (data[i] === CR && data[i + 1] === LF) i += 2;
        if (i >= data.length) break;
      }
      const isHead = state.kind === 'head';
      const end = data.indexOf(isHead ? HEAD_END : LINE_END, i);
      const limit = isHead ? MAX_HEAD_BYTES : MAX_LINE_BYTES;
      if ((end === -1 ? data.length : end) - i > limit) {
        // A head: its start may lie in an earlier chunk (offset 0). A line inside a body: that request's own bytes went to Node already.
        return isHead ? refuse(at(i, base), `request head over ${MAX_HEAD_BYTES} bytes`, 'HEADERS_TOO_LARGE') : refuse(this.inBody(base), `a chunk-size or trailer line over ${MAX_LINE_BYTES} bytes`);
      }
      if (end === -1) {
        this.carry = Buffer.from(data.subarray(i));
        return OK;
      }
      const start = i;
      i = end + (isHead ? HEAD_END.length : LINE_END.length);
      if (isHead) {
        const problem = this.readHead(data, start, end);
        // A head that began in an earlier chunk: none of this chunk goes to Node.
        if (problem !== undefined) return { ok: false, offset: at(start, base), ...problem };
        this.messageStart = start;
        continue;
      }
      // The rest are lines inside a chunked body.
      const line = data.toString('latin1', start, end);
      let problem: string | undefined;
      if (state.kind === 'chunk-size') problem = this.readChunkSize(line);
      else if (state.kind === 'chunk-end') {
        if (line.length === 0) this.state = { kind: 'chunk-size' };
        else problem = 'chunk data longer than its size';
      } else if (state.kind === 'trailers') {
        if (line.length === 0) this.state = this.afterMessage();
        else if (++state.lines > MAX_HEADER_COUNT) return refuse(this.inBody(base), `more than ${MAX_HEADER_COUNT} trailer lines`, 'HEADERS_TOO_LARGE');
        else problem = fieldLineProblem(line);
      }
      if (problem !== undefined) return refuse(this.inBody(base), problem);
    }
    return OK;
  }

  /** A refusal inside a body drops the whole request it belongs to (none of it reaches a handler). */
  private inBody(base: number): number {
    return this.messageStart === undefined ? 0 : at(this.messageStart, base);
  }

  /** After a request's last byte: the next request, or nothing more after an upgrade. */
  private afterMessage(): State {
    return this.upgraded ? CLOSED : HEAD;
  }

  /**
   * Checks a request head (`data` from `start` to `end`, without its blank line) and sets how its body
   * is framed; returns why it is refused, if it is. Read byte by byte, not as text: it runs for every
   * request, and a string per line and per name cost more than the check itself (docs/performance.md).
   * Bytes are latin1 characters here, so the rules are those of the character patterns above.
   */
  private readHead(data: Buffer, start: number, end: number): { reason: string; code: 'MALFORMED_REQUEST' | 'HEADERS_TOO_LARGE' } | undefined {
    // Line ends (CR LF) in JavaScript, not Buffer.indexOf: a call into C++ per line cost more than a
    // short head's whole scan.
    let lines = 1;
    for (let i = start; i + 1 < end; i++) {
      if (data[i] === CR && data[i + 1] === LF) {
        lines++;
        i++;
      }
    }
    if (lines - 1 > MAX_HEADER_COUNT) return { reason: `more than ${MAX_HEADER_COUNT} header lines`, code: 'HEADERS_TOO_LARGE' };
    const lineEnd = lineEndFrom(data, start, end);
    const version = requestLineVersion(data, start, lineEnd);
    if (version === undefined) return malformed('malformed request line: method, target and HTTP/1.x must be separated by single spaces');
    let contentLength: number | undefined;
    let chunked = false;
    let hosts = 0;
    let upgradeHeader = false;
    let connectionUpgrade = false;
    for (let from = lineEnd + 2; from < end + 2; ) {
      const to = lineEndFrom(data, from, end);
      const colon = colonIn(data, from, to);
      const problem = fieldLineProblemAt(data, from, colon, to);
      if (problem !== undefined) return malformed(problem);
      const value = colon + 1;
      if (isName(data, from, colon, TRANSFER_ENCODING)) {
        if (chunked) return malformed('more than one Transfer-Encoding header');
        // Exactly `chunked`, one optional space after the colon: no list, no case or whitespace variant.
        if (!isChunked(data, value, to)) return malformed(`Transfer-Encoding must be exactly "chunked", not ${JSON.stringify(data.toString('latin1', value, to).slice(0, 40))}`);
        chunked = true;
      } else if (isName(data, from, colon, CONTENT_LENGTH_NAME)) {
        if (contentLength !== undefined) return malformed('more than one Content-Length header');
        // Up to 15 digits: a length the guard counts exactly (and far past any body limit).
        const length = contentLengthValue(data, value, to);
        if (length === undefined) return malformed(`Content-Length must be 1 to 15 digits, not ${JSON.stringify(data.toString('latin1', value, to).trim().slice(0, 40))}`);
        contentLength = length;
      } else if (isName(data, from, colon, HOST)) {
        hosts++;
      } else if (isName(data, from, colon, UPGRADE)) {
        upgradeHeader = true;
      } else if (isName(data, from, colon, CONNECTION)) {
        connectionUpgrade ||= listsUpgrade(data, value, to);
      }
      from = to + 2;
    }
    if (chunked && contentLength !== undefined) return malformed('both Content-Length and Transfer-Encoding');
    // RFC 9112 §3.2: exactly one Host in an HTTP/1.1 request.
    if (hosts > 1 || (hosts === 0 && version === '1.1')) return malformed(hosts > 1 ? 'more than one Host header' : 'no Host header');
    // Node treats a request as an upgrade exactly when it is CONNECT or names `upgrade` in Connection
    // and carries Upgrade; what follows its body is then not HTTP, and no further request is read.
    this.upgraded = isConnect(data, start) || (upgradeHeader && connectionUpgrade);
    if (chunked) this.state = { kind: 'chunk-size' };
    else if (contentLength !== undefined && contentLength > 0) this.state = { kind: 'body', remaining: contentLength };
    else this.state = this.afterMessage();
    return undefined;
  }

  private readChunkSize(line: string): string | undefined {
    const semi = line.indexOf(';');
    const size = (semi === -1 ? line : line.slice(0, semi)).replace(/[ \t]+$/, '');
    const extension = semi === -1 ? '' : line.slice(semi);
    if (!HEX.test(size) || !FIELD_VALUE.test(extension)) return `malformed chunk size line ${JSON.stringify(line.slice(0, 40))}`;
    const significant = size.replace(/^0+(?=.)/, '');
    if (significant.length > MAX_CHUNK_HEX_DIGITS) return `chunk size over ${MAX_CHUNK_HEX_DIGITS} hex digits`;
    const bytes = parseInt(significant, 16);
    this.state = bytes === 0 ? { kind: 'trailers', lines: 0 } : { kind: 'chunk-data', remaining: bytes };
    return undefined;
  }
}

/** Why a header (or trailer) line is not `token ":" value`, if it is not. */
function fieldLineProblem(line: string): string | undefined {
  const colon = line.indexOf(':');
  if (colon <= 0) return 'a header line without a name and a colon (or an obs-fold)';
  if (!TOKEN.test(line.slice(0, colon))) return 'a header name that is not a token';
  if (!FIELD_VALUE.test(line.slice(colon + 1))) return 'a header value with a control character (bare CR or LF, NUL)';
  return undefined;
}

/** An index of the scanned data as an offset in the chunk (`base`: minus the carried bytes' length). */
function at(index: number, base: number): number {
  return Math.max(0, index + base);
}

/**
 * The request line from `start` to `end`: method, target and version separated by single spaces (so
 * exactly two), the method a token, the target visible ASCII, the version HTTP/1.0 or HTTP/1.1.
 * Returns '1.0' or '1.1', or undefined when the line is refused.
 */
function requestLineVersion(data: Buffer, start: number, end: number): '1.0' | '1.1' | undefined {
  let first = -1;
  let second = -1;
  for (let i = start; i < end; i++) {
    if (data[i] !== SPACE) continue;
    if (first === -1) first = i;
    else if (second === -1) second = i;
    else return undefined;
  }
  if (first <= start || second <= first + 1) return undefined;
  for (let i = start; i < first; i++) if (IS_TOKEN[data[i] as number] === 0) return undefined;
  for (let i = first + 1; i < second; i++) {
    const byte = data[i] as number;
    if (byte < 0x21 || byte > 0x7e) return undefined;
  }
  // "HTTP/1." then 0 or 1, nothing more.
  if (end - second - 1 !== 8 || !startsWith(data, second + 1, HTTP_1)) return undefined;
  const minor = data[end - 1];
  return minor === 0x30 ? '1.0' : minor === 0x31 ? '1.1' : undefined;
}

/** Whether the request line from `start` begins with the method CONNECT. */
function isConnect(data: Buffer, start: number): boolean {
  return startsWith(data, start, CONNECT);
}

/** Where the line from `from` ends: its CR LF, or `end`. */
function lineEndFrom(data: Buffer, from: number, end: number): number {
  for (let i = from; i + 1 < end; i++) if (data[i] === CR && data[i + 1] === LF) return i;
  return end;
}

/** The first colon from `from` to `to`, or -1. */
function colonIn(data: Buffer, from: number, to: number): number {
  for (let i = from; i < to; i++) if (data[i] === 0x3a) return i;
  return -1;
}

/** fieldLineProblem of the bytes from `start` to `end`, whose first colon is at `colon` (-1: none). */
function fieldLineProblemAt(data: Buffer, start: number, colon: number, end: number): string | undefined {
  if (colon <= start) return 'a header line without a name and a colon (or an obs-fold)';
  for (let i = start; i < colon; i++) if (IS_TOKEN[data[i] as number] === 0) return 'a header name that is not a token';
  for (let i = colon + 1; i < end; i++) if (IS_FIELD_VALUE[data[i] as number] === 0) return 'a header value with a control character (bare CR or LF, NUL)';
  return undefined;
}

/** Whether `data` holds `prefix` at `at`. */
function startsWith(data: Buffer, at: number, prefix: Buffer): boolean {
  if (at + prefix.length > data.length) return false;
  for (let i = 0; i < prefix.length; i++) if (data[at + i] !== prefix[i]) return false;
  return true;
}

/**
 * Whether a Connection value lists `upgrade`: split at commas, each element trimmed as JavaScript's
 * trim() does (within a field value: tab, space, no-break space) and compared in any case.
 */
function listsUpgrade(data: Buffer, start: number, end: number): boolean {
  for (let from = start; from <= end; ) {
    let to = from;
    while (to < end && data[to] !== 0x2c) to++;
    let first = from;
    let last = to;
    while (first < last && isTrimmed(data[first] as number)) first++;
    while (last > first && isTrimmed(data[last - 1] as number)) last--;
    if (isName(data, first, last, UPGRADE)) return true;
    from = to + 1;
  }
  return false;
}

/** What JavaScript's trim() removes of a field value's characters: tab, space, no-break space. */
function isTrimmed(byte: number): boolean {
  return byte === 0x09 || byte === SPACE || byte === 0xa0;
}

/** Whether the bytes from `start` to `end` are `lower`, in any case (ASCII letters fold; nothing else changes, as with toLowerCase on latin1 text). */
function isName(data: Buffer, start: number, end: number, lower: Buffer): boolean {
  if (end - start !== lower.length) return false;
  for (let i = 0; i < lower.length; i++) {
    // Token characters: ASCII; upper-case letters fold to lower case, nothing else changes.
    let byte = data[start + i] as number;
    if (byte >= 0x41 && byte <= 0x5a) byte += 0x20;
    if (byte !== lower[i]) return false;
  }
  return true;
}

/** Whether the value from `start` to `end` is exactly "chunked" or " chunked". */
function isChunked(data: Buffer, start: number, end: number): boolean {
  const from = data[start] === SPACE ? start + 1 : start;
  return end - from === CHUNKED.length && startsWith(data, from, CHUNKED);
}

/**
 * A Content-Length value: 1 to 15 digits, with the whitespace JavaScript's trim() removes around it
 * (within a field value that can only be tab, space and no-break space). Undefined when it is not.
 */
function contentLengthValue(data: Buffer, start: number, end: number): number | undefined {
  let from = start;
  let to = end;
  while (from < to && isTrimmed(data[from] as number)) from++;
  while (to > from && isTrimmed(data[to - 1] as number)) to--;
  if (to - from < 1 || to - from > 15) return undefined;
  let length = 0;
  for (let i = from; i < to; i++) {
    const digit = (data[i] as number) - 0x30;
    if (digit < 0 || digit > 9) return undefined;
    length = length * 10 + digit;
  }
  return length;
}

function malformed(reason: string): { reason: string; code: 'MALFORMED_REQUEST' } {
  return { reason, code: 'MALFORMED_REQUEST' };
}

function refuse(offset: number, reason: string, code: 'MALFORMED_REQUEST' | 'HEADERS_TOO_LARGE' = 'MALFORMED_REQUEST'): GuardVerdict {
  return { ok: false, offset, reason, code };
}
