import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { RawJson } from '../invocation/raw-json.js';

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
 * The request as the worker's JSON, with the body's own JSON text spliced in instead of serialising
 * the parsed body again (docs/performance.md): one JSON pass less per request, most of the cost for
 * large bodies. Only for a body nothing changed since it was parsed. The worker parses the same
 * values (key order in the request object differs: `body` comes last).
 */
export function apiRequestWithBodyJson(request: ApiRequest, bodyJson: string): RawJson {
  const body = request.body;
  request.body = undefined; // omitted by JSON.stringify
  let json: string;
  try {
    json = JSON.stringify(request);
  } finally {
    request.body = body;
  }
  return new RawJson(`${json.slice(0, -1)},"body":${bodyJson}}`);
}

/** Header names are lower-case (Node gives them so); repeated headers are joined with ", ". */
export function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out = Object.create(null) as Record<string, string>;
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
