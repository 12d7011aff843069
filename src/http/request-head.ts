import { HTTP_TOKEN } from '../values.js';

/**
 * Reading one HTTP/1.1 request head for the framing guard (framing-guard.ts; docs/http.md#framing):
 * its request line, how many header lines it has, and the headers that decide where its body ends
 * (Content-Length, Transfer-Encoding) or that nothing follows it (Upgrade with Connection: upgrade,
 * CONNECT). Read byte by byte, not as text: it runs for every request, and a string per line and per
 * name cost more than the check itself (docs/performance.md). Bytes are latin1 characters here, so
 * the rules are those of the character patterns below. Pure: bytes in, a verdict out.
 */

/** Header lines per request (hyper's default in iii; trailers count against it too). */
export const MAX_HEADER_COUNT = 100;
/** Field values: visible characters, spaces and tabs, obs-text; no CR, LF or NUL. */
export const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** What a byte may be: a token character (RFC 9110), a field-value character (FIELD_VALUE). */
const IS_TOKEN = new Uint8Array(256);
const IS_FIELD_VALUE = new Uint8Array(256);
for (let byte = 0; byte < 256; byte++) {
  IS_TOKEN[byte] = HTTP_TOKEN.test(String.fromCharCode(byte)) ? 1 : 0;
  IS_FIELD_VALUE[byte] = FIELD_VALUE.test(String.fromCharCode(byte)) ? 1 : 0;
}
/** The header names read (lower case), as bytes. */
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

export type HeadProblem = { reason: string; code: 'MALFORMED_REQUEST' | 'HEADERS_TOO_LARGE' };

/**
 * A head (`data` from `start` to `end`, without its blank line): how its body is framed, and whether
 * nothing may follow the request (`upgrade`), or why it is refused.
 */
export function readRequestHead(data: Buffer, start: number, end: number): { chunked: boolean; contentLength: number | undefined; upgrade: boolean } | HeadProblem {
  // A head with nothing unusual in it is read in one pass; anything else (a refusal, a repeated or
  // odd framing header, more than 100 lines) is read again by the exact reading, which names it.
  const framing = cleanHeadFraming(data, start, end) ?? exactHeadFraming(data, start, end);
  if ('reason' in framing) return framing;
  const { version, contentLength, chunked, hosts, upgradeHeader, connectionUpgrade } = framing;
  if (chunked && contentLength !== undefined) return malformed('both Content-Length and Transfer-Encoding');
  // RFC 9112 §3.2: exactly one Host in an HTTP/1.1 request.
  if (hosts > 1 || (hosts === 0 && version === '1.1')) return malformed(hosts > 1 ? 'more than one Host header' : 'no Host header');
  // Node treats a request as an upgrade exactly when it is CONNECT or names `upgrade` in Connection
  // and carries Upgrade; what follows its body is then not HTTP, and no further request is read.
  return { chunked, contentLength, upgrade: startsWith(data, start, CONNECT) || (upgradeHeader && connectionUpgrade) };
}

/** How a head frames its request, as read from its request line and framing headers. */
interface HeadFraming {
  version: '1.0' | '1.1';
  contentLength: number | undefined;
  chunked: boolean;
  hosts: number;
  upgradeHeader: boolean;
  connectionUpgrade: boolean;
}

/**
 * The exact reading of a head (`data` from `start` to `end`): every rule in the order the refusals
 * are named — the line count first, then the request line, then each header line. It runs for a head
 * that cleanHeadFraming declined.
 */
export function exactHeadFraming(data: Buffer, start: number, end: number): HeadFraming | HeadProblem {
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
return { version, contentLength, chunked, hosts, upgradeHeader, connectionUpgrade };
}

/**
 * The common head in one pass: a request line of token, visible target and HTTP/1.0 or 1.1 separated
 * by single spaces, then lines of token, colon and field value, at most 100, with at most one
 * Transfer-Encoding (exactly `chunked`) and one Content-Length (1 to 15 digits). Undefined for
 * anything else, which exactHeadFraming reads again: the two agree on every head this one accepts
 * (test/unit/framing-guard.test.ts checks them against each other on generated heads).
 */
export function cleanHeadFraming(data: Buffer, start: number, end: number): HeadFraming | undefined {
  let i = start;
  while (i < end && IS_TOKEN[data[i] as number] === 1) i++;
  if (i === start || i === end || data[i] !== SPACE) return undefined;
  const target = ++i;
  while (i < end && (data[i] as number) >= 0x21 && (data[i] as number) <= 0x7e) i++;
  if (i === target || i === end || data[i] !== SPACE) return undefined;
  i++;
  // "HTTP/1." then 0 or 1, then the end of the head or CR LF.
  if (i + 8 > end || !startsWith(data, i, HTTP_1)) return undefined;
  const minor = data[i + 7];
  const version = minor === 0x30 ? '1.0' : minor === 0x31 ? '1.1' : undefined;
  if (version === undefined) return undefined;
  i += 8;
  let contentLength: number | undefined;
  let chunked = false;
  let hosts = 0;
  let upgradeHeader = false;
  let connectionUpgrade = false;
  let lines = 0;
  while (i < end) {
    if (data[i] !== CR || data[i + 1] !== LF || ++lines > MAX_HEADER_COUNT) return undefined;
    const from = i + 2;
    i = from;
    while (i < end && IS_TOKEN[data[i] as number] === 1) i++;
    if (i === from || i === end || data[i] !== 0x3a) return undefined;
    const colon = i;
    i++;
    while (i < end && IS_FIELD_VALUE[data[i] as number] === 1) i++;
    // `i` is the end of the head or the next line's CR (checked at the top of the loop).
    const value = colon + 1;
    switch (colon - from) {
      case TRANSFER_ENCODING.length:
        if (isName(data, from, colon, TRANSFER_ENCODING)) {
          if (chunked || !isChunked(data, value, i)) return undefined;
          chunked = true;
        }
        break;
      case CONTENT_LENGTH_NAME.length:
        if (isName(data, from, colon, CONTENT_LENGTH_NAME)) {
          if (contentLength !== undefined) return undefined;
          contentLength = contentLengthValue(data, value, i);
          if (contentLength === undefined) return undefined;
        }
        break;
      case HOST.length:
        if (isName(data, from, colon, HOST)) hosts++;
        break;
      case UPGRADE.length:
        if (isName(data, from, colon, UPGRADE)) upgradeHeader = true;
        break;
      case CONNECTION.length:
        if (isName(data, from, colon, CONNECTION)) connectionUpgrade ||= listsUpgrade(data, value, i);
        break;
      default:
    }
  }
  return { version, contentLength, chunked, hosts, upgradeHeader, connectionUpgrade };
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

/** Whether `data` holds `prefix` at `at`. */
function startsWith(data: Buffer, at: number, prefix: Buffer): boolean {
  if (at + prefix.length > data.length) return false;
  for (let i = 0; i < prefix.length; i++) if (data[at + i] !== prefix[i]) return false;
  return true;
}

function malformed(reason: string): { reason: string; code: 'MALFORMED_REQUEST' } {
  return { reason, code: 'MALFORMED_REQUEST' };
}
