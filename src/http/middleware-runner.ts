import type { Logger } from 'pino';
import type { MiddlewarePhase } from '../config/types.js';
import type { ApiRequest } from './api-request.js';
import { apiRequestJson, requestChanged } from './api-request.js';
import { RawJson } from '../invocation/raw-json.js';
import type { InvocationFailure, Invoker } from '../invocation/invoker.js';
import type { EngineMetrics } from '../observability/metrics.js';
import { performance } from 'node:perf_hooks';
import { deepMerge, MergeDepthError } from '../middleware/merge.js';
import { HTTP_TOKEN, isPlainObject } from '../values.js';
import type { InvocationSpan } from '../observability/tracing.js';
import { spanOptions } from '../observability/tracing.js';
import { decodeMiddlewareResult } from '../middleware/middleware-result.js';

/** What a middleware function receives (http-module.md §2.5, plus `error` in onError/onTimeout). */
export interface MiddlewareCall {
  phase: MiddlewarePhase;
  /** The live request: `continue` patches are merged into it, and into `request.context`. */
  request: ApiRequest;
  matchedRoute?: { function_id: string; path_pattern: string };
  response?: unknown;
  error?: { code: string; message: string };
}

export type PhaseOutcome =
  | { kind: 'continue' }
  | { kind: 'respond'; response: Record<string, unknown>; functionId: string }
  /** `failure`: the worker's own error (the middleware threw), answered like a handler's. */
  | { kind: 'failed'; functionId: string; reason: string; timedOut: boolean; failure?: InvocationFailure };

const CONTINUE: PhaseOutcome = Object.freeze({ kind: 'continue' });

/** Request fields a `continue.request` patch may change; the rest (id, ip, trigger) is the engine's. */
const PATCHABLE_REQUEST_KEYS: ReadonlySet<string> = new Set(['path', 'method', 'headers', 'query_params', 'path_params', 'body']);
const METHOD_TOKEN = HTTP_TOKEN;

/**
 * Why a request patch is unusable, or undefined. `path` and `method` are scalars and `headers` must be
 * an object, so each replaces (or merges into) the live value exactly as checked here.
 */
function invalidRequestPatch(patch: Record<string, unknown>): string | undefined {
  const { path, method, headers } = patch;
  if (Object.hasOwn(patch, 'path') && (typeof path !== 'string' || !path.startsWith('/') || /[?#]/.test(path))) {
    return 'request.path patch must be an absolute path without query or fragment';
  }
  if (Object.hasOwn(patch, 'method') && (typeof method !== 'string' || !METHOD_TOKEN.test(method))) {
    return 'request.method patch must be an HTTP method';
  }
  if (Object.hasOwn(patch, 'headers') && !isPlainObject(headers)) return 'request.headers patch must keep headers an object';
  return undefined;
}

function matchedRouteJson(route: { function_id: string; path_pattern: string }): string {
  return `{"function_id":${JSON.stringify(route.function_id)},"path_pattern":${JSON.stringify(route.path_pattern)}}`;
}

/**
 * Runs the middleware of one phase in order (docs/middleware.md): each is invoked through the invoker
 * within the deadline; `continue` merges its patches and passes on, `respond` ends the phase. Anything
 * else fails the phase, so a middleware that is down never lets a request through.
 */
export class MiddlewareRunner {
  constructor(
    private readonly invoker: Invoker,
    private readonly logger: Logger,
    private readonly metrics?: EngineMetrics,
  ) {}

  /** `spans`: a span per call (the request's trace, docs/observability.md); none in unit tests. */
  async run(functionIds: readonly string[], call: MiddlewareCall, deadline: number, requestId: string, spans?: (functionId: string) => InvocationSpan): Promise<PhaseOutcome> {
    for (const functionId of functionIds) {
      const started = performance.now();
      const outcome = await this.callOne(functionId, call, deadline, requestId, spans?.(functionId));
      this.metrics?.middlewareCall(call.phase, outcome?.kind ?? 'continue', (performance.now() - started) / 1000);
      if (outcome !== undefined) return outcome;
    }
    return CONTINUE;
  }

  /** One middleware call: undefined means `continue` (patches applied), anything else ends the phase. */
  private async callOne(
    functionId: string,
    call: MiddlewareCall,
    deadline: number,
    requestId: string,
    span: InvocationSpan | undefined,
  ): Promise<PhaseOutcome | undefined> {
    // No `has()` shortcut: the invoker answers FUNCTION_UNAVAILABLE at once for a function nobody
    // serves, and waits out the reconnect grace for one whose worker just left (docs/reliability.md).
    const outcome = await this.invoker.invoke(functionId, this.payload(call), spanOptions(span, { deadline, requestId }));
    if (span?.recording === true) span.end(outcome.ok ? undefined : outcome.failure);
    if (!outcome.ok) {
      const { failure } = outcome;
      const timedOut = failure.source === 'engine' && failure.code === 'TIMEOUT';
      const failed: PhaseOutcome = { kind: 'failed', functionId, reason: `${failure.code}: ${failure.message}`, timedOut };
      if (failure.source === 'worker') failed.failure = failure;
      return failed;
    }
    const decoded = decodeMiddlewareResult(outcome.value);
    if (!decoded.ok) return { kind: 'failed', functionId, reason: decoded.reason, timedOut: false };
    if (decoded.empty === true) {
      // As iii: a middleware that answers nothing lets the request go on (docs/middleware.md#results).
      this.logger.warn({ functionId, requestId, phase: call.phase }, 'middleware returned no result; continuing');
      return undefined;
    }
    const result = decoded.result;
    if (result.action === 'respond') return { kind: 'respond', response: result.response, functionId };
    const problem = this.applyPatches(call.request, result.request, result.context, functionId, requestId);
    return problem === undefined ? undefined : { kind: 'failed', functionId, reason: problem, timedOut: false };
  }

  /** The MiddlewareRequest as JSON text: the request's untouched body is spliced in, never re-parsed. */
  private payload(call: MiddlewareCall): RawJson {
    // The payload's members are written one by one: no intermediate object to serialise (phases are
    // fixed tokens that need no escaping).
    let json = `{"phase":"${call.phase}","request":${apiRequestJson(call.request)},"context":${JSON.stringify(call.request.context)}`;
    if (call.matchedRoute !== undefined) json += `,"matched_route":${matchedRouteJson(call.matchedRoute)}`;
    if (call.response !== undefined) json += `,"response":${JSON.stringify(call.response)}`;
    if (call.error !== undefined) json += `,"error":${JSON.stringify(call.error)}`;
    return new RawJson(`${json}}`);
  }

  /** Returns a reason when the patch is unusable; the request is then failed, never half-trusted. */
  private applyPatches(
    request: ApiRequest,
    requestPatch: Record<string, unknown> | undefined,
    contextPatch: Record<string, unknown> | undefined,
    functionId: string,
    requestId: string,
  ): string | undefined {
    let refused = 0;
    try {
      if (requestPatch !== undefined) {
        const allowed: Record<string, unknown> = {};
        for (const key of Object.keys(requestPatch)) {
          if (PATCHABLE_REQUEST_KEYS.has(key)) allowed[key] = requestPatch[key];
        }
        // Validate before merging: the live request outlives a failed phase (onError, onTimeout and
        // onResponse still select by `request.path` and send the request), so it must never hold a
        // non-string path or method. A `{path: 7}` patch used to crash the engine process there.
        const problem = invalidRequestPatch(allowed);
        if (problem !== undefined) return problem;
        refused += deepMerge(request as unknown as Record<string, unknown>, allowed).refusedKeys;
        request.method = request.method.toUpperCase();
      }
      if (contextPatch !== undefined) refused += deepMerge(request.context, contextPatch).refusedKeys;
    } catch (err) {
      if (err instanceof MergeDepthError) return err.message;
      throw err;
    } finally {
      // Even a merge that failed half-way may have changed the request: its JSON is built again.
      if (requestPatch !== undefined || contextPatch !== undefined) requestChanged(request);
    }
    if (refused > 0) {
      this.logger.warn({ functionId, requestId, refusedKeys: refused }, 'middleware patch keys __proto__/constructor/prototype refused');
    }
    return undefined;
  }
}
