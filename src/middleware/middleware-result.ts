import { isPlainObject } from '../values.js';

/** What a middleware function may return (http-module.md §2.6). */
export type MiddlewareResult =
  | { action: 'continue'; request?: Record<string, unknown>; context?: Record<string, unknown> }
  | { action: 'respond'; response: Record<string, unknown> };

/** `empty`: the middleware returned nothing, read as `continue` (as iii does, with a warning). */
export type MiddlewareResultDecode = { ok: true; result: MiddlewareResult; empty?: true } | { ok: false; reason: string };

const EMPTY: MiddlewareResultDecode = Object.freeze({ ok: true, result: Object.freeze({ action: 'continue' }), empty: true });

export function decodeMiddlewareResult(value: unknown): MiddlewareResultDecode {
  if (value === undefined || value === null) return EMPTY;
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
