import type { ServerResponse } from 'node:http';
import { HTTP_ERRORS } from '../errors.js';
import type { HttpErrorCode } from '../errors.js';
import { untouchedBody } from '../protocol/answer-body.js';
import { HTTP_TOKEN, isPlainObject } from '../values.js';

/**
 * Turning a handler's ApiResponse into HTTP (docs/http.md#responses), and the engine's own error
 * envelope `{"error":{"code","message"},"request_id"}`.
 */
export interface HttpReply {
  status: number;
  /** Lower-case names; a name may repeat (Set-Cookie). */
  headers: [string, string][];
  body: string | Buffer | undefined;
  /** The error envelope's code, when this reply is one (engine code or the worker's own): metrics. */
  errorCode?: string;
  /** Handler headers left out because they were invalid (logged as a warning when the reply is sent). */
  droppedHeaders?: readonly string[];
}

export type MapResult = { ok: true; reply: HttpReply } | { ok: false; message: string };

const TOKEN = HTTP_TOKEN;
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
/** The engine owns framing and connection management; a handler cannot set these. */
const ENGINE_OWNED = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'trailer']);

const isRecord = isPlainObject;

/**
 * Adds one handler-set header to `out` (lower-cased), or says why it is invalid. Headers the engine
 * owns (framing, connection) are dropped silently.
 */
export function addResponseHeader(out: [string, string][], name: string, value: unknown): string | undefined {
  if (!TOKEN.test(name)) return `invalid header name ${JSON.stringify(name)}`;
  let text: string;
  if (typeof value === 'string') text = value;
  // A non-finite number is a JSON number too large for a double (1e400 parses as Infinity): not a value.
  else if ((typeof value === 'number' && Number.isFinite(value)) || typeof value === 'boolean') text = String(value);
  else return `invalid value for header ${name}`;
  if (INVALID_VALUE.test(text)) return `header ${name} contains forbidden characters (CR, LF or control)`;
  const lower = name.toLowerCase();
  if (!ENGINE_OWNED.has(lower)) out.push([lower, text]);
  return undefined;
}

/**
 * The handler's headers into `out`. An invalid header (a name that is not a token, a value with CR, LF
 * or another control character, an item that is not "Name: value") is dropped and described in
 * `dropped`; the rest are sent, as iii does (types.rs skips invalid headers with a warning). Nothing
 * invalid ever reaches the wire.
 */
function mapHeaders(raw: unknown, out: [string, string][], dropped: string[]): void {
  if (raw === undefined || raw === null) return;
  if (Array.isArray(raw)) {
    for (const item of raw) {
      if (typeof item !== 'string') {
        dropped.push('headers array items must be "Name: value" strings');
        continue;
      }
      const colon = item.indexOf(':');
      if (colon <= 0) {
        dropped.push(`header ${JSON.stringify(item)} is not "Name: value"`);
        continue;
      }
      const problem = addResponseHeader(out, item.slice(0, colon).trim(), item.slice(colon + 1).trim());
      if (problem !== undefined) dropped.push(problem);
    }
    return;
  }
  if (isRecord(raw)) {
    for (const [name, value] of Object.entries(raw)) {
      const values = Array.isArray(value) ? value : [value];
      for (const v of values) {
        const problem = addResponseHeader(out, name, v);
        if (problem !== undefined) dropped.push(problem);
      }
    }
    return;
  }
  dropped.push('headers must be an object or an array of "Name: value" strings');
}

/**
 * A handler's ApiResponse as HTTP (docs/http.md#responses). As iii: no `body` sends `{}` and
 * `body: null` sends `null` (both JSON; with the handler's own content type, `null` sends nothing),
 * except for 204 and 304, which have no body (HEAD's is left out by Node).
 */
export function mapApiResponse(value: unknown): MapResult {
  if (!isRecord(value)) return { ok: false, message: 'handler result is not an ApiResponse object' };
  const rawStatus = value.status_code ?? 200;
  if (typeof rawStatus !== 'number' || !Number.isInteger(rawStatus) || rawStatus < 200 || rawStatus > 599) {
    return { ok: false, message: `invalid status_code ${JSON.stringify(rawStatus)} (must be an integer 200-599)` };
  }
  const headers: [string, string][] = [];
  const dropped: string[] = [];
  mapHeaders(value.headers, headers, dropped);
  const reply = (body: string | Buffer | undefined): MapResult => ({
    ok: true,
    reply: dropped.length === 0 ? { status: rawStatus, headers, body } : { status: rawStatus, headers, body, droppedHeaders: dropped },
  });

  if (rawStatus === 204 || rawStatus === 304) return reply(undefined);
  const hasContentType = headers.some(([name]) => name === 'content-type');
  // A large answer's body still as the worker wrote it (an array or object, in JSON.stringify's own
  // form: answer-body.ts): those bytes are what serialising it would give. Asked before `body` is read.
  const bytes = untouchedBody(value);
  if (bytes !== undefined) {
    if (!hasContentType) headers.push(['content-type', 'application/json']);
    return reply(bytes);
  }
  const body = value.body === undefined ? EMPTY_OBJECT : value.body;
  if (hasContentType && (typeof body === 'string' || body === null)) return reply(body ?? undefined);
  let json: string;
  try {
    json = JSON.stringify(body);
  } catch (err) {
    // JSON.stringify recurses: a body nested a few thousand levels deep (valid on the wire, which
    // JSON.parse reads without recursing) overflows the stack. The handler's answer is at fault.
    return { ok: false, message: `body cannot be serialised as JSON: ${(err as Error).message}` };
  }
  if (!hasContentType) headers.push(['content-type', 'application/json']);
  return reply(json);
}

const EMPTY_OBJECT = Object.freeze({});

/** The error envelope for an engine code of src/errors.ts: its status, its message unless given. */
export function errorReply(
  code: HttpErrorCode,
  requestId: string,
  options: { message?: string; extra?: Record<string, unknown>; headers?: [string, string][] } = {},
): HttpReply {
  const known = HTTP_ERRORS[code];
  return envelope(known.status, code, options.message ?? known.message, requestId, options.extra, options.headers);
}

/** The error envelope for a worker's own failure (its code and message, relayed): always 500. */
export function workerErrorReply(failure: { code: string; message: string }, requestId: string): HttpReply {
  return envelope(500, failure.code, failure.message, requestId);
}

function envelope(
  status: number,
  code: string,
  message: string,
  requestId: string,
  extra?: Record<string, unknown>,
  extraHeaders?: [string, string][],
): HttpReply {
  const payload = { error: { code, message }, ...extra, request_id: requestId };
  const headers: [string, string][] = [['content-type', 'application/json'], ...(extraHeaders ?? [])];
  return { status, headers, body: JSON.stringify(payload), errorCode: code };
}

/**
 * Writes a reply plus the engine's own headers (request id, CORS). Names are lower-case on both sides
 * (the engine's own and addResponseHeader's); an engine header replaces a handler's of the same name.
 */
export function writeReply(
  res: ServerResponse,
  reply: HttpReply,
  engineHeaders: Record<string, string>,
): void {
  const length = reply.body === undefined ? (reply.status === 204 || reply.status === 304 ? undefined : 0) : Buffer.byteLength(reply.body);
  const flat = distinctHeaders(reply.headers, engineHeaders, length);
  if (flat !== undefined) {
    // Every name once: the whole head in one call, without Node's per-response header map and a
    // setHeader per name (docs/performance.md, issue 26). Node validates each name and value here as
    // setHeader would.
    res.writeHead(reply.status, flat);
  } else {
    const grouped = new Map<string, string | string[]>();
    for (const [name, value] of reply.headers) {
      const held = grouped.get(name);
      if (held === undefined) grouped.set(name, value);
      else if (Array.isArray(held)) held.push(value);
      else grouped.set(name, [held, value]);
    }
    for (const [name, value] of Object.entries(engineHeaders)) grouped.set(name, value);
    for (const [name, value] of grouped) res.setHeader(name, value);
    if (length !== undefined) res.setHeader('content-length', length);
    res.statusCode = reply.status;
  }
  if (reply.body === undefined) res.end();
  else res.end(reply.body);
}

/** The most reply headers written through the flat path (typical replies carry a handful). */
const MAX_FLAT_HEADERS = 32;

/**
 * The reply's headers, the engine's, then content-length, as Node's flat [name, value, …] list, in
 * the order the grouped path sets them; undefined when a name repeats or the engine replaces one of
 * the handler's (the grouped path keeps those cases as they were).
 */
function distinctHeaders(headers: readonly [string, string][], engineHeaders: Record<string, string>, length: number | undefined): string[] | undefined {
  // The repeat check compares each name with those before it: a worker's reply with thousands of
  // headers would make that quadratic, so past a few the grouped path (one map) takes them.
  if (headers.length > MAX_FLAT_HEADERS) return undefined;
  const flat: string[] = [];
  for (let i = 0; i < headers.length; i++) {
    const [name, value] = headers[i] as [string, string];
    if (Object.hasOwn(engineHeaders, name) || name === 'content-length') return undefined;
    for (let j = 0; j < i; j++) if ((headers[j] as [string, string])[0] === name) return undefined;
    flat.push(name, value);
  }
  for (const name in engineHeaders) flat.push(name, engineHeaders[name] as string);
  if (length !== undefined) flat.push('content-length', String(length));
  return flat;
}
