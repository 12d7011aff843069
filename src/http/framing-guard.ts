import { HTTP_TOKEN } from '../values.js';
import { FIELD_VALUE, type HeadProblem, MAX_HEADER_COUNT, readRequestHead } from './request-head.js';

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
const MAX_LINE_BYTES = 1024;
/** 2^48 - 1: the largest chunk the guard counts (a chunk size of more than 12 hex digits is refused). */
const MAX_CHUNK_HEX_DIGITS = 12;
const TOKEN = HTTP_TOKEN;
const HEX = /^[0-9A-Fa-f]+$/;
const CR = 0x0d;
const LF = 0x0a;
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
   * Reads a request head (`data` from `start` to `end`, without its blank line, request-head.ts) and
   * sets how its body is framed; returns why it is refused, if it is.
   */
  private readHead(data: Buffer, start: number, end: number): HeadProblem | undefined {
    const head = readRequestHead(data, start, end);
    if ('reason' in head) return head;
    this.upgraded = head.upgrade;
    if (head.chunked) this.state = { kind: 'chunk-size' };
    else if (head.contentLength !== undefined && head.contentLength > 0) this.state = { kind: 'body', remaining: head.contentLength };
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

function refuse(offset: number, reason: string, code: 'MALFORMED_REQUEST' | 'HEADERS_TOO_LARGE' = 'MALFORMED_REQUEST'): GuardVerdict {
  return { ok: false, offset, reason, code };
}
