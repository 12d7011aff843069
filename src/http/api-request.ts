import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { RawJson } from '../invocation/raw-json.js';
import { dataRecord } from '../values.js';

/** The ApiRequest a handler receives (http-module.md §2.3, plus `request_id` and `ip`). */
export interface ApiRequest {
  path: string;
  method: string;
  path_params: Record<string, string>;
  query_params: Record<string, string>;
  body: unknown;
  headers: Record<string, string>;
  trigger: { type: 'http'; path: string; method: string };
  context: Record<string, unknown>;
  request_id: string;
  ip: string;
}

/**
 * JSON request bodies are kept as they arrived (checked, never parsed: body.ts) until something reads
 * or replaces `body`: the common path splices them into the worker frame and never holds a parsed
 * copy (docs/performance.md: a parsed 64 KiB body outlived young-generation GC for the whole request
 * and drove a child's RSS past 150 MB). A body that is valid UTF-8 stays bytes, copied into the frame
 * as they are; otherwise it is its decoded text. Reading `body` parses it once and from then on the
 * parsed value is the body, patches included. The body sits under a symbol key, which JSON,
 * Object.keys and middleware patches never see.
 */
const UNTOUCHED_BODY = Symbol('untouched JSON body');
/**
 * The request's JSON up to its body's value (`…,"body":`), kept from one invocation to the next:
 * middleware and handler of one request get the same request text unless something changed it in
 * between, and whatever changes it calls `requestChanged` (the pipeline after matching, middleware
 * patches, a body assignment). Under a symbol key, which JSON, Object.keys and patches never see. (A
 * WeakMap beside the request cost about 0.8 µs more per request JSON in a micro-benchmark: every
 * request added an entry the GC traces as an ephemeron, where most requests read the text only once.)
 * A request without an untouched body keeps its whole JSON without the closing brace instead.
 */
const JSON_HEAD = Symbol('request JSON up to its body');
type Memoised = ApiRequest & { [UNTOUCHED_BODY]?: string | Buffer | undefined; [JSON_HEAD]?: string | undefined };

/** Forgets the request's JSON text: call after changing any of its fields. */
export function requestChanged(request: ApiRequest): void {
  (request as Memoised)[JSON_HEAD] = undefined;
}

export type ApiRequestFields = Omit<ApiRequest, 'body'>;

/** An ApiRequest whose body is `json` (valid JSON, as text or UTF-8 bytes), parsed only if something reads it. */
export function apiRequestWithJsonBody(f: ApiRequestFields, json: string | Buffer): ApiRequest {
  let value: unknown;
  // One object literal (accessors included): the same shape for every request, unlike defineProperty.
  const request: Memoised = {
    path: f.path,
    method: f.method,
    path_params: f.path_params,
    query_params: f.query_params,
    get body(): unknown {
      const untouched = request[UNTOUCHED_BODY];
      if (untouched !== undefined) {
        value = JSON.parse(typeof untouched === 'string' ? untouched : untouched.toString('utf8'));
        request[UNTOUCHED_BODY] = undefined;
        request[JSON_HEAD] = undefined;
      }
      return value;
    },
    set body(next: unknown) {
      request[UNTOUCHED_BODY] = undefined;
      request[JSON_HEAD] = undefined;
      value = next;
    },
    headers: f.headers,
    trigger: f.trigger,
    context: f.context,
    request_id: f.request_id,
    ip: f.ip,
    [UNTOUCHED_BODY]: json,
    [JSON_HEAD]: undefined,
  };
  return request;
}

/**
 * The request's JSON up to where `tail` goes (its closing brace, or more members and the brace): with
 * an untouched body, up to and including `"body":`, the body itself being `untouched`.
 */
function requestHead(memo: Memoised): { head: string; untouched: string | Buffer | undefined } {
  const untouched = memo[UNTOUCHED_BODY];
  let head = memo[JSON_HEAD];
  if (head === undefined) {
    if (untouched === undefined) {
      head = JSON.stringify(memo).slice(0, -1);
    } else {
      const { path, method, path_params, query_params, headers, trigger, context, request_id, ip } = memo;
      head = `${JSON.stringify({ path, method, path_params, query_params, headers, trigger, context, request_id, ip }).slice(0, -1)},"body":`;
    }
    memo[JSON_HEAD] = head;
  }
  return { head, untouched };
}

/**
 * The request as the worker's JSON: an untouched body is spliced in as it arrived (one JSON pass less
 * per request, most of the cost for large bodies). The worker parses the same values. The other
 * fields are fixed: middleware may patch only the ApiRequest's own keys. `extra` is more members as
 * JSON text (the handler's channel refs), added after the request's own.
 */
export function apiRequestJson(request: ApiRequest, extra?: string): string {
  const { head, untouched } = requestHead(request);
  const tail = extra === undefined ? '}' : `,${extra}}`;
  if (untouched === undefined) return `${head}${tail}`;
  return `${head}${typeof untouched === 'string' ? untouched : untouched.toString('utf8')}${tail}`;
}

/**
 * The request as invocation data: JSON text, so an untouched body is never parsed again; a body still
 * in its bytes stays bytes (RawJson.spliced), and a worker connection copies them into its frame.
 */
export function apiRequestData(request: ApiRequest, extra?: string): RawJson {
  const { head, untouched } = requestHead(request);
  const tail = extra === undefined ? '}' : `,${extra}}`;
  if (untouched === undefined) return new RawJson(`${head}${tail}`);
  return typeof untouched === 'string' ? new RawJson(`${head}${untouched}${tail}`) : RawJson.spliced(head, untouched, tail);
}

/** Header names are lower-case (Node gives them so); repeated headers are joined with ", ". */
export function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out = dataRecord();
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

function stripMappedPrefix(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

/** With `trust_proxy`, the left-most X-Forwarded-For entry is the client; otherwise the socket peer. */
export function clientIp(req: IncomingMessage, trustProxy: boolean): string {
  if (trustProxy) {
    const forwarded = req.headers['x-forwarded-for'];
    const first = (Array.isArray(forwarded) ? forwarded[0] : forwarded)?.split(',')[0]?.trim();
    if (first !== undefined && first.length > 0) return stripMappedPrefix(first);
  }
  return stripMappedPrefix(req.socket.remoteAddress ?? '');
}
