/**
 * The framing guard as it read request heads before issue 26 (as text: a string per line, per name,
 * per value), kept only to check the byte-level reading of src/http/framing-guard.ts against it:
 * test/unit/framing-guard.test.ts feeds both the same generated streams and expects the same verdicts.
 * Not used by the engine.
 */
import { HTTP_TOKEN } from '../../src/values.js';
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
type GuardVerdict = { ok: true } | { ok: false; offset: number; reason: string; code: 'MALFORMED_REQUEST' | 'HEADERS_TOO_LARGE' };

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
const MAX_HEAD_BYTES = 16 * 1024;
/** Header lines per request (hyper's default in iii; trailers count against it too). */
const MAX_HEADER_COUNT = 100;
const MAX_LINE_BYTES = 1024;
/** 2^48 - 1: the largest chunk the guard counts (a chunk size of more than 12 hex digits is refused). */
const MAX_CHUNK_HEX_DIGITS = 12;
const TOKEN = HTTP_TOKEN;
const TARGET = /^[\x21-\x7e]+$/;
const VERSION = /^HTTP\/1\.[01]$/;
const HEX = /^[0-9A-Fa-f]+$/;
/** Field values: visible characters, spaces and tabs, obs-text; no CR, LF or NUL. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const CONTENT_LENGTH = /^\d{1,15}$/;
const HEAD_END = Buffer.from('\r\n\r\n');
const LINE_END = Buffer.from('\r\n');
const OK: GuardVerdict = { ok: true };

export class ReferenceFramingGuard {
  private state: State = { kind: 'head' };
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
    const at = (index: number): number => Math.max(0, index + base);
    this.messageStart = undefined;
    // A refusal inside a body drops the whole request it belongs to (none of it reaches a handler).
    const inBody = (): number => (this.messageStart === undefined ? 0 : at(this.messageStart));
    let i = 0;
    while (i < data.length) {
      const state = this.state;
      if (state.kind === 'closed') return refuse(at(i), 'bytes after a protocol upgrade or CONNECT request');
      if (state.kind === 'body' || state.kind === 'chunk-data') {
        const take = Math.min(state.remaining, data.length - i);
        i += take;
        state.remaining -= take;
        if (state.remaining === 0) this.state = state.kind === 'body' ? this.afterMessage() : { kind: 'chunk-end' };
        continue;
      }
      if (state.kind === 'head') {
        // Empty lines before a request line are tolerated (RFC 9112 §2.2), as Node does.
        while (data[i] === 0x0d && data[i + 1] === 0x0a) i += 2;
        if (i >= data.length) break;
      }
      const isHead = state.kind === 'head';
      const end = data.indexOf(isHead ? HEAD_END : LINE_END, i);
      const limit = isHead ? MAX_HEAD_BYTES : MAX_LINE_BYTES;
      if ((end === -1 ? data.length : end) - i > limit) {
        // A head: its start may lie in an earlier chunk (offset 0). A line inside a body: that request's own bytes went to Node already.
        return isHead ? refuse(at(i), `request head over ${MAX_HEAD_BYTES} bytes`, 'HEADERS_TOO_LARGE') : refuse(inBody(), `a chunk-size or trailer line over ${MAX_LINE_BYTES} bytes`);
      }
      if (end === -1) {
        this.carry = Buffer.from(data.subarray(i));
        return OK;
      }
      const bytes = data.subarray(i, end);
      const start = i;
      i = end + (isHead ? HEAD_END.length : LINE_END.length);
      if (isHead) {
        const problem = this.readHead(bytes.toString('latin1'));
        // A head that began in an earlier chunk: none of this chunk goes to Node.
        if (problem !== undefined) return { ok: false, offset: at(start), ...problem };
        this.messageStart = start;
        continue;
      }
      // The rest are lines inside a chunked body.
      const line = bytes.toString('latin1');
      let problem: string | undefined;
      if (state.kind === 'chunk-size') problem = this.readChunkSize(line);
      else if (state.kind === 'chunk-end') {
        if (line.length === 0) this.state = { kind: 'chunk-size' };
        else problem = 'chunk data longer than its size';
      } else if (state.kind === 'trailers') {
        if (line.length === 0) this.state = this.afterMessage();
        else if (++state.lines > MAX_HEADER_COUNT) return refuse(inBody(), `more than ${MAX_HEADER_COUNT} trailer lines`, 'HEADERS_TOO_LARGE');
        else problem = fieldLineProblem(line);
      }
      if (problem !== undefined) return refuse(inBody(), problem);
    }
    return OK;
  }

  /** After a request's last byte: the next request, or nothing more after an upgrade. */
  private afterMessage(): State {
    return this.upgraded ? { kind: 'closed' } : { kind: 'head' };
  }

  /** Checks a request head and sets how its body is framed; returns why it is refused, if it is. */
  private readHead(text: string): { reason: string; code: 'MALFORMED_REQUEST' | 'HEADERS_TOO_LARGE' } | undefined {
    const malformed = (reason: string) => ({ reason, code: 'MALFORMED_REQUEST' as const });
    const lines = text.split('\r\n');
    if (lines.length - 1 > MAX_HEADER_COUNT) return { reason: `more than ${MAX_HEADER_COUNT} header lines`, code: 'HEADERS_TOO_LARGE' };
    const parts = (lines[0] as string).split(' ');
    if (parts.length !== 3 || !TOKEN.test(parts[0] as string) || !TARGET.test(parts[1] as string) || !VERSION.test(parts[2] as string)) {
      return malformed('malformed request line: method, target and HTTP/1.x must be separated by single spaces');
    }
    let contentLength: number | undefined;
    let chunked = false;
    let hosts = 0;
    let upgradeHeader = false;
    let connectionUpgrade = false;
    for (let n = 1; n < lines.length; n++) {
      const line = lines[n] as string;
      const problem = fieldLineProblem(line);
      if (problem !== undefined) return malformed(problem);
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).toLowerCase();
      const value = line.slice(colon + 1);
      if (name === 'transfer-encoding') {
        if (chunked) return malformed('more than one Transfer-Encoding header');
        // Exactly `chunked`, one optional space after the colon: no list, no case or whitespace variant.
        if (value !== ' chunked' && value !== 'chunked') return malformed(`Transfer-Encoding must be exactly "chunked", not ${JSON.stringify(value.slice(0, 40))}`);
        chunked = true;
      } else if (name === 'content-length') {
        if (contentLength !== undefined) return malformed('more than one Content-Length header');
        const digits = value.trim();
        // Up to 15 digits: a length the guard counts exactly (and far past any body limit).
        if (!CONTENT_LENGTH.test(digits)) return malformed(`Content-Length must be 1 to 15 digits, not ${JSON.stringify(digits.slice(0, 40))}`);
        contentLength = Number(digits);
      } else if (name === 'host') {
        hosts++;
      } else if (name === 'upgrade') {
        upgradeHeader = true;
      } else if (name === 'connection') {
        connectionUpgrade ||= value.split(',').some((token) => token.trim().toLowerCase() === 'upgrade');
      }
    }
    if (chunked && contentLength !== undefined) return malformed('both Content-Length and Transfer-Encoding');
    // RFC 9112 §3.2: exactly one Host in an HTTP/1.1 request.
    if (hosts > 1 || (hosts === 0 && parts[2] === 'HTTP/1.1')) return malformed(hosts > 1 ? 'more than one Host header' : 'no Host header');
    // Node treats a request as an upgrade exactly when it is CONNECT or names `upgrade` in Connection
    // and carries Upgrade; what follows its body is then not HTTP, and no further request is read.
    this.upgraded = parts[0] === 'CONNECT' || (upgradeHeader && connectionUpgrade);
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

function refuse(offset: number, reason: string, code: 'MALFORMED_REQUEST' | 'HEADERS_TOO_LARGE' = 'MALFORMED_REQUEST'): GuardVerdict {
  return { ok: false, offset, reason, code };
}
