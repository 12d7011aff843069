import { isPlainObject } from '../values.js';

/** What a middleware function may return (http-module.md §2.6). */
export type MiddlewareResult =
  | { action: 'continue'; request?: Record<string, unknown>; context?: Record<string, unknown> }
  | { action: 'respond'; response: Record<string, unknown> };

export type MiddlewareResultDecode = { ok: true; result: MiddlewareResult } | { ok: false; reason: string };

export function decodeMiddlewareResult(value: unknown): MiddlewareResultDecode {
  if (!isPlainObject(value)) return { ok: false, reason: 'middleware returned no result object' };
  if (value.action === 'continue') {
    const { request, context } = value;
    if (request !== undefined && request !== null && !isPlainObject(request)) {
      return { ok: false, reason: 'continue.request must be an object' };
    }
    if (context !== undefined && context !== null && !isPlainObject(context)) {
      return { ok: false, reason: 'continue.context must be an object' };
    }
    const result: MiddlewareResult = { action: 'continue' };
    if (isPlainObject(request)) result.request = request;
    if (isPlainObject(context)) result.context = context;
    return { ok: true, result };
  }
  if (value.action === 'respond') {
    if (!isPlainObject(value.response)) return { ok: false, reason: 'respond needs a response object' };
    return { ok: true, result: { action: 'respond', response: value.response } };
  }
  return { ok: false, reason: `action must be "continue" or "respond", got ${JSON.stringify(value.action) ?? 'nothing'}` };
}
