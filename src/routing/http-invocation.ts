import type { HttpInvocation, HttpInvocationAuth } from './registrations.js';
import { HTTP_TOKEN, isPlainObject } from '../values.js';

/**
 * The `invocation` of a `registerfunction` (an HTTP-invoked function), read from the wire (iii-sdk's
 * snake_case shape: url, method, timeout_ms, headers, auth) and from a peer's snapshot (the record's
 * camelCase shape). Both return the record or a reason; nothing here touches the network.
 */

const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);
const HEADER_NAME = HTTP_TOKEN;
// Header values: visible characters, spaces and tabs; no CR or LF (no header injection).
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const MAX_TIMEOUT_MS = 2_147_483_647;

const isObject = isPlainObject;
const isText = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

function checkHeaders(v: unknown): Record<string, string> | string {
  if (!isObject(v)) return 'headers must be an object of strings';
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(v)) {
    if (!HEADER_NAME.test(name) || typeof value !== 'string' || !HEADER_VALUE.test(value)) return `header ${JSON.stringify(name)} is not a valid header`;
    out[name] = value;
  }
  return out;
}

function build(
  url: unknown,
  method: unknown,
  timeoutMs: unknown,
  headers: unknown,
  auth: HttpInvocationAuth | string | undefined,
): HttpInvocation | string {
  if (!isText(url)) return 'invocation.url must be a non-empty string';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'invocation.url is not a valid URL';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return 'invocation.url must be http: or https:';
  const verb = method === undefined || method === null ? 'POST' : method;
  if (typeof verb !== 'string' || !METHODS.has(verb.toUpperCase())) return 'invocation.method must be GET, POST, PUT, PATCH or DELETE';
  const invocation: HttpInvocation = { url, method: verb.toUpperCase() };
  if (timeoutMs !== undefined && timeoutMs !== null) {
    if (typeof timeoutMs !== 'number' || !Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_TIMEOUT_MS) {
      return 'invocation.timeout_ms must be a positive integer';
    }
    invocation.timeoutMs = timeoutMs;
  }
  if (headers !== undefined && headers !== null) {
    const checked = checkHeaders(headers);
    if (typeof checked === 'string') return `invocation.${checked}`;
    invocation.headers = checked;
  }
  if (typeof auth === 'string') return auth;
  if (auth !== undefined) invocation.auth = auth;
  return invocation;
}

function wireAuth(v: unknown): HttpInvocationAuth | string | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) return 'invocation.auth must be an object';
  switch (v.type) {
    case 'hmac':
      return isText(v.secret_key) ? { type: 'hmac', secretKey: v.secret_key } : 'invocation.auth.secret_key must name an environment variable';
    case 'bearer':
      return isText(v.token_key) ? { type: 'bearer', tokenKey: v.token_key } : 'invocation.auth.token_key must name an environment variable';
    case 'api_key':
      return isText(v.header) && HEADER_NAME.test(v.header) && isText(v.value_key)
        ? { type: 'api_key', header: v.header, valueKey: v.value_key }
        : 'invocation.auth needs a header name and a value_key naming an environment variable';
    default:
      return 'invocation.auth.type must be hmac, bearer or api_key';
  }
}

/** From `registerfunction` (iii-sdk's HttpInvocationConfig). */
export function parseWireInvocation(v: unknown): HttpInvocation | string {
  if (!isObject(v)) return 'invocation must be an object';
  return build(v.url, v.method, v.timeout_ms, v.headers, wireAuth(v.auth));
}

function recordAuth(v: unknown): HttpInvocationAuth | string | undefined {
  if (v === undefined) return undefined;
  if (!isObject(v)) return 'invocation auth must be an object';
  if (v.type === 'hmac' && isText(v.secretKey)) return { type: 'hmac', secretKey: v.secretKey };
  if (v.type === 'bearer' && isText(v.tokenKey)) return { type: 'bearer', tokenKey: v.tokenKey };
  if (v.type === 'api_key' && isText(v.header) && HEADER_NAME.test(v.header) && isText(v.valueKey)) {
    return { type: 'api_key', header: v.header, valueKey: v.valueKey };
  }
  return 'invocation auth is malformed';
}

/** From a peer's snapshot (the record as published). */
export function checkInvocation(v: unknown): HttpInvocation | string {
  if (!isObject(v)) return 'invocation must be an object';
  return build(v.url, v.method, v.timeoutMs, v.headers, recordAuth(v.auth));
}
