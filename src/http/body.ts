import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { checkJson } from '../protocol/json-check.js';
import { dataRecord } from '../values.js';

/**
 * Reading and decoding request bodies (docs/http.md#bodies). Reading is bounded by the body limit
 * (declared or streamed) and by the request deadline; decoding follows the content type.
 */
export type BodyReadResult =
  | { ok: true; bytes: Buffer }
  | { ok: false; code: 'PAYLOAD_TOO_LARGE' | 'REQUEST_TIMEOUT' | 'ABORTED' };

const EMPTY = Buffer.alloc(0);

export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return req.headers['transfer-encoding'] !== undefined;
}

/**
 * Which bodies the engine buffers and parses, and which it streams to the handler untouched
 * (docs/streaming.md#request-bodies): JSON, form and text bodies are buffered (up to the body limit)
 * and parsed into `body`; so is any other body that declares a length within the body limit (its
 * `body` is base64). The rest (no declared length, or a larger one) stream over the handler's
 * `request_body` channel, bounded by the stream limit, with `body: null`. Either way the raw bytes
 * are on the channel.
 */
export type BodyPlan = 'none' | 'buffer' | 'stream' | 'too_large';

export function planBody(req: IncomingMessage, bodyLimitBytes: number, streamLimitBytes: number): BodyPlan {
  if (!hasBody(req)) return 'none';
  if (bodyKind(req.headers['content-type']) !== 'binary') return 'buffer';
  const declared = req.headers['content-length'];
  if (declared === undefined) return 'stream';
  const length = Number(declared);
  if (length <= bodyLimitBytes) return 'buffer';
  return streamLimitBytes > 0 && length > streamLimitBytes ? 'too_large' : 'stream';
}

/** How a content type's body is decoded: parsed JSON, a form, text, or bytes (base64). */
function bodyKind(contentType: string | undefined): 'json' | 'form' | 'text' | 'binary' {
  const type = mediaType(contentType);
  if (type === 'application/json' || type.endsWith('+json')) return 'json';
  if (type === 'application/x-www-form-urlencoded') return 'form';
  return type.startsWith('text/') ? 'text' : 'binary';
}

/**
 * `onRefused` runs synchronously when the read fails, before the result is delivered: the connection
 * is then unusable, and later requests parsed on it must see that before their own code resumes.
 */
export function readBody(req: IncomingMessage, limitBytes: number, timeoutMs: number, onRefused?: () => void): Promise<BodyReadResult> {
  if (!hasBody(req)) return Promise.resolve({ ok: true, bytes: EMPTY });
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limitBytes) {
    onRefused?.();
    return Promise.resolve({ ok: false, code: 'PAYLOAD_TOO_LARGE' });
  }
  return new Promise<BodyReadResult>((resolve) => {
    const chunks: Buffer[] = [];
    let received = 0;
    let done = false;
    const finish = (result: BodyReadResult): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('aborted', onAborted);
      req.off('error', onAborted);
      if (!result.ok) {
        req.pause();
        onRefused?.();
      }
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      if (received > limitBytes) finish({ ok: false, code: 'PAYLOAD_TOO_LARGE' });
      else chunks.push(chunk);
    };
    const onEnd = (): void => finish({ ok: true, bytes: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks) });
    const onAborted = (): void => finish({ ok: false, code: 'ABORTED' });
    const timer = setTimeout(() => finish({ ok: false, code: 'REQUEST_TIMEOUT' }), Math.max(0, timeoutMs));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('aborted', onAborted);
    req.on('error', onAborted);
  });
}

/**
 * A JSON body comes back as itself (`json`: valid and depth-checked, never parsed), so it can be sent
 * on as is and parsed only if something reads it (apiRequestWithJsonBody): its bytes when they are
 * valid UTF-8 (they are then exactly the bytes its text encodes to, and go into the worker's frame
 * without being decoded and encoded again), else its decoded text (invalid sequences become U+FFFD,
 * as they always did).
 */
export type BodyDecodeResult = { ok: true; body: unknown } | { ok: true; json: string | Buffer } | { ok: false; code: 'INVALID_JSON'; message?: string };

/**
 * JSON bodies nested deeper than this are refused (400 INVALID_JSON). JSON.parse does not recurse,
 * but JSON.stringify does: a body of a few thousand nested arrays parsed fine and then threw
 * "Maximum call stack size exceeded" when the invocation was encoded for the worker (500
 * INTERNAL_ERROR, and the invocation stayed pending until its deadline). 512 leaves a wide margin.
 */
export const MAX_JSON_DEPTH = 512;

function mediaType(contentType: string | undefined): string {
  if (contentType === undefined) return '';
  const semi = contentType.indexOf(';');
  return (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
}

/** Form fields and query strings become objects that inherit nothing: a `__proto__` key stays plain data. */
export function searchParamsToObject(params: URLSearchParams): Record<string, string> {
  const out = dataRecord();
  for (const [key, value] of params) out[key] = value; // last value wins for repeated keys
  return out;
}

export function decodeBody(bytes: Buffer, contentType: string | undefined): BodyDecodeResult {
  if (bytes.length === 0) return { ok: true, body: null };
  const kind = bodyKind(contentType);
  if (kind === 'json') {
    // Checked without building the value or decoding the text: the body travels on as it is.
    const check = checkJson(bytes, MAX_JSON_DEPTH);
    if (check === 'invalid') return { ok: false, code: 'INVALID_JSON' };
    if (check === 'too_deep') {
      return { ok: false, code: 'INVALID_JSON', message: `Request body JSON is nested deeper than ${MAX_JSON_DEPTH} levels` };
    }
    return { ok: true, json: isUtf8(bytes) ? bytes : bytes.toString('utf8') };
  }
  if (kind === 'form') return { ok: true, body: searchParamsToObject(new URLSearchParams(bytes.toString('utf8'))) };
  if (kind === 'text') return { ok: true, body: bytes.toString('utf8') };
  return { ok: true, body: bytes.toString('base64') };
}
