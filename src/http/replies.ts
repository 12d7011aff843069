import type { InvocationFailure, InvocationOutcome } from '../invocation/invoker.js';
import type { HttpReply } from './response.js';
import { errorReply, mapApiResponse, workerErrorReply } from './response.js';
import { dataRecord } from '../values.js';

/** How an invocation's outcome becomes HTTP (docs/http.md#errors-and-status-codes). Pure functions. */
export const RETRY_AFTER_SECONDS = '1';

export function outcomeReply(outcome: InvocationOutcome, requestId: string): HttpReply {
  return outcome.ok ? responseReply(outcome.value, requestId) : failureReply(outcome.failure, requestId);
}

/** An ApiResponse from a handler or a middleware `respond`, as HTTP (502 when it is not valid). */
export function responseReply(value: unknown, requestId: string): HttpReply {
  const mapped = mapApiResponse(value);
  if (!mapped.ok) return errorReply('INVALID_RESPONSE', requestId, { message: `invalid handler response: ${mapped.message}` });
  return mapped.reply;
}

export function failureReply(failure: InvocationFailure, requestId: string): HttpReply {
  if (failure.source === 'worker') return workerErrorReply(failure, requestId);
  if (failure.code === 'FUNCTION_UNAVAILABLE') {
    return errorReply('FUNCTION_UNAVAILABLE', requestId, { headers: [['retry-after', RETRY_AFTER_SECONDS]] });
  }
  return errorReply(failure.code, requestId, { message: failure.message });
}

/** The response as onResponse middleware sees it: status, header map, body (JSON bodies parsed). */
export function sentResponse(reply: HttpReply): { status_code: number; headers: Record<string, string>; body: unknown } {
  // Inheriting nothing: a header the worker named `constructor` or `__proto__` is a header like any other.
  const headers = dataRecord();
  for (const [name, value] of reply.headers) headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  let body: unknown = reply.body === undefined ? null : reply.body.toString();
  if (typeof body === 'string' && headers['content-type']?.startsWith('application/json')) {
    try {
      body = JSON.parse(body);
    } catch {
      // sent as is; keep the text
    }
  }
  return { status_code: reply.status, headers, body };
}
