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
 * Pure: no sockets. Where it cannot follow the stream (an oversized head, which Node answers with
 * 431; a malformed header line or chunk, which Node refuses itself; a protocol upgrade or CONNECT) it
 * stops following and leaves the rest to Node's parser.
 */
export type GuardVerdict = { ok: true } | { ok: false; offset: number; reason: string };

type State =
  | { kind: 'head' }
  | { kind: 'body'; remaining: number }
  | { kind: 'chunk-size' }
  | { kind: 'chunk-data'; remaining: number }
  | { kind: 'chunk-end' }
  | { kind: 'trailers' }
  | { kind: 'opaque' };

/** Node's own head limit (http-server.ts); past it Node answers 431. */
const MAX_HEAD_BYTES = 16 * 1024;
const MAX_LINE_BYTES = 1024;
const TOKEN = HTTP_TOKEN;
const TARGET = /^[\x21-\x7e]+$/;
const VERSION = /^HTTP\/1\.[01]$/;
const HEX = /^[0-9A-Fa-f]{1,12}$/;
const HEAD_END = Buffer.from('\r\n\r\n');
const LINE_END = Buffer.from('\r\n');
const OK: GuardVerdict = { ok: true };

export class FramingGuard {
  private state: State = { kind: 'head' };
  /** The start of a head or line that the previous chunk ended inside. */
  private carry: Buffer | undefined;

  scan(chunk: Buffer): GuardVerdict {
    // `data` is the carried bytes and the chunk; `base` maps an index of `data` to one of `chunk`.
    const carried = this.carry;
    this.carry = undefined;
    const data = carried === undefined ? chunk : Buffer.concat([carried, chunk]);
    const base = carried === undefined ? 0 : -carried.length;
    let i = 0;
    while (i < data.length) {
      const state = this.state;
      if (state.kind === 'opaque') return OK;
      if (state.kind === 'body' || state.kind === 'chunk-data') {
        const take = Math.min(state.remaining, data.length - i);
        i += take;
        state.remaining -= take;
        if (state.remaining === 0) this.state = state.kind === 'body' ? { kind: 'head' } : { kind: 'chunk-end' };
        continue;
      }
      if (state.kind === 'head') {
        // Empty lines before a request line are tolerated (RFC 9112 §2.2), as Node does.
        while (data[i] === 0x0d && data[i + 1] === 0x0a) i += 2;
        if (i >= data.length) break;
      }
      const isHead = state.kind === 'head';
      const end = data.indexOf(isHead ? HEAD_END : LINE_END, i);
      if (end === -1) {
        if (data.length - i > (isHead ? MAX_HEAD_BYTES : MAX_LINE_BYTES)) return this.opaque();
        this.carry = Buffer.from(data.subarray(i));
        return OK;
      }
      const bytes = data.subarray(i, end);
      const start = i;
      i = end + (isHead ? HEAD_END.length : LINE_END.length);
      if (isHead) {
        const problem = this.readHead(bytes.toString('latin1'));
        // A head that began in an earlier chunk: none of this chunk goes to Node.
        if (problem !== undefined) return { ok: false, offset: Math.max(0, start + base), reason: problem };
      } else if (state.kind === 'chunk-size') {
        this.readChunkSize(bytes.toString('latin1'));
      } else if (state.kind === 'chunk-end') {
        this.state = bytes.length === 0 ? { kind: 'chunk-size' } : { kind: 'opaque' };
      } else if (bytes.length === 0) {
        this.state = { kind: 'head' }; // the empty line after the trailers
      }
    }
    return OK;
  }

  /** Checks a request head and sets how its body is framed; returns why it is refused, if it is. */
  private readHead(text: string): string | undefined {
    const lines = text.split('\r\n');
    const parts = (lines[0] as string).split(' ');
    if (parts.length !== 3 || !TOKEN.test(parts[0] as string) || !TARGET.test(parts[1] as string) || !VERSION.test(parts[2] as string)) {
      return 'malformed request line: method, target and HTTP/1.x must be separated by single spaces';
    }
    let contentLength = 0;
    let chunked = false;
    let upgrade = parts[0] === 'CONNECT';
    for (let n = 1; n < lines.length; n++) {
      const line = lines[n] as string;
      const colon = line.indexOf(':');
      if (colon <= 0) return this.stopFollowing(); // Node refuses the line itself (400)
      const name = line.slice(0, colon).toLowerCase();
      const value = line.slice(colon + 1);
      if (name === 'transfer-encoding') {
        if (chunked) return 'more than one Transfer-Encoding header';
        // Exactly `chunked`, one optional space after the colon: no list, no case or whitespace variant.
        if (value !== ' chunked' && value !== 'chunked') return `Transfer-Encoding must be exactly "chunked", not ${JSON.stringify(value.slice(0, 40))}`;
        chunked = true;
      } else if (name === 'content-length') {
        const digits = value.trim();
        if (!/^\d{1,15}$/.test(digits)) return this.stopFollowing(); // Node refuses it (400)
        contentLength = Number(digits);
      } else if (name === 'upgrade') {
        upgrade = true;
      }
    }
    if (upgrade) return this.stopFollowing();
    if (chunked) this.state = { kind: 'chunk-size' };
    else if (contentLength > 0) this.state = { kind: 'body', remaining: contentLength };
    else this.state = { kind: 'head' };
    return undefined;
  }

  private readChunkSize(line: string): void {
    const semi = line.indexOf(';');
    const size = (semi === -1 ? line : line.slice(0, semi)).trim();
    if (!HEX.test(size)) {
      this.stopFollowing(); // Node refuses it (400)
      return;
    }
    const bytes = parseInt(size, 16);
    this.state = bytes === 0 ? { kind: 'trailers' } : { kind: 'chunk-data', remaining: bytes };
  }

  /** Stops following: Node's parser alone decides what comes next. */
  private stopFollowing(): undefined {
    this.state = { kind: 'opaque' };
    this.carry = undefined;
    return undefined;
  }

  private opaque(): GuardVerdict {
    this.stopFollowing();
    return OK;
  }
}
