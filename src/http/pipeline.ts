import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { Tracing } from '../observability/tracing.js';
import { PassThroughTracing, endedWith, spanOptions } from '../observability/tracing.js';
import type { ApiConfig } from '../config/types.js';
import type { InvocationOutcome, Invoker } from '../invocation/invoker.js';
import type { EngineMetrics } from '../observability/metrics.js';
import { Admission } from './admission.js';
import { MiddlewareRunner } from './middleware-runner.js';
import { RequestPhases } from './request-phases.js';
import type { RequestState } from './request-state.js';
import type { RouteTable } from '../routing/route-table.js';
import type { ApiRequest } from './api-request.js';
import { apiRequestData, apiRequestWithJsonBody, clientIp, flattenHeaders, requestChanged } from './api-request.js';
import { decodeBody, planBody, readBody, searchParamsToObject } from './body.js';
import { closeAfterReply, isClosing, markClosing } from './connection-close.js';
import { CorsPolicy } from './cors.js';
import { resolveRequestId } from './request-id.js';
import type { ChannelRegistry } from '../channels/channel-registry.js';
import type { HandlerAnswer } from './request-channels.js';
import { RequestChannels } from './request-channels.js';
import type { StreamHeapGrowth } from './stream-heap.js';
import type { StreamEnd } from './response-stream.js';
import type { HttpReply } from './response.js';
import { errorReply, writeReply } from './response.js';
import { outcomeReply, responseReply, RETRY_AFTER_SECONDS } from './replies.js';
import { dataRecord } from '../values.js';

export interface PipelineDeps {
  config: ApiConfig;
  table: RouteTable;
  invoker: Invoker;
  logger: Logger;
  metrics?: EngineMetrics;
  /** Where handlers' `request_body` and `response` channels live (docs/streaming.md); none: no channels. */
  channels?: ChannelRegistry;
  /**
   * When set, every response carries `x-switchyard-served-by: <peer>; forwarded=<bool>` (opt-in
   * with SWITCHYARD_SERVED_BY_HEADER=1: tells operators and benchmarks which process answered).
   */
  servedBy?: string;
  /** Spans and the trace context handed to workers (docs/observability.md); default: pass-through. */
  tracing?: Tracing;
  /** Raises the process's heap growing factor while large bodies stream (engine children only). */
  streamHeap?: StreamHeapGrowth;
}

/**
 * Fresh per request, never a shared frozen object: middleware `continue` patches merge into
 * `query_params` and `path_params` in place, and merging into a frozen object threw (500
 * INTERNAL_ERROR for any query_params patch on a request without a query string).
 */
const emptyParams = (): Record<string, string> => dataRecord();

/** What reading a request without a body gives (readBody's answer for it, without its promise). */
const NO_BODY = { ok: true, bytes: Buffer.alloc(0) } as const;

/** A streamed body is not decoded: `body` is null and the bytes are on the request_body channel. */
const STREAMED_BODY = { ok: true, body: null } as const;

/**
 * The request lifecycle (docs/http.md): admission → CORS → route match → body → condition →
 * handler → response. Every wait is bounded by the request's single deadline. The middleware phases
 * around those steps are request-phases.ts.
 */
export class HttpPipeline {
  private draining = false;
  /** The concurrency limit and the line of requests waiting for a slot. */
  private readonly admission: Admission;
  private readonly cors: CorsPolicy;
  private readonly config: ApiConfig;
  /** The middleware phases around each request. */
  private readonly phases: RequestPhases;

  private readonly tracing: Tracing;

  constructor(private readonly deps: PipelineDeps) {
    this.config = deps.config;
    this.cors = new CorsPolicy(deps.config.cors);
    this.admission = new Admission(deps.config.concurrencyRequestLimit, deps.config.concurrencyQueueLimit);
    this.phases = new RequestPhases(new MiddlewareRunner(deps.invoker, deps.logger, deps.metrics), deps.logger, deps.config.defaultTimeoutMs);
    this.tracing = deps.tracing ?? new PassThroughTracing();
  }

  get activeRequests(): number {
    return this.admission.active;
  }

  /** From now on new requests (and those waiting for a slot) get 503 SHUTTING_DOWN; admitted ones finish. */
  startDraining(): void {
    this.draining = true;
    this.admission.close();
  }

  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    const startedAt = performance.now();
    const requestId = resolveRequestId(req.headers[this.config.requestIdHeader]);
    const state: RequestState = {
      req,
      res,
      requestId,
      startedAt,
      deadline: startedAt + this.config.defaultTimeoutMs,
      engineHeaders: { [this.config.requestIdHeader]: requestId },
      requestTrace: this.tracing.request(
        headerValue(req.headers.traceparent),
        headerValue(req.headers.baggage),
        req.method ?? 'GET',
        req.url ?? '/',
        headerValue(req.headers.tracestate),
      ),
      route: undefined,
      routing: undefined,
      apiRequest: undefined,
      closeConnection: false,
      admitted: false,
      finished: false,
      trace: { forwarded: false },
      bodySource: undefined,
    };
    // One reaction for both outcomes (not a catch and a finally: a promise and a step less per request).
    this.run(state).then(
      () => this.ended(state),
      (err: unknown) => {
        try {
          this.deps.logger.error({ err, requestId }, 'request failed inside the engine');
          this.finish(state, errorReply('INTERNAL_ERROR', requestId));
        } finally {
          this.ended(state);
        }
      },
    );
  };

  /**
   * The engine's work for the request is over. The slot is held until then, not until the client hangs
   * up: otherwise clients that abort could keep more calls running on workers than the limit allows.
   */
  private ended(state: RequestState): void {
    if (state.admitted) this.admission.leave();
  }

  private async run(state: RequestState): Promise<void> {
    const { req, requestId } = state;
    const method = req.method ?? 'GET';
    const cors = this.cors.decide(method, req.headers);
    if (cors.kind === 'headers') Object.assign(state.engineHeaders, cors.headers);

    if (this.draining) {
      state.closeConnection = true;
      return this.finish(state, errorReply('SHUTTING_DOWN', requestId));
    }
    if (!this.admission.tryEnter() && !(await this.waitForSlot(state))) return;
    state.admitted = true;

    if (cors.kind === 'preflight') {
      return this.finish(state, { status: 204, headers: Object.entries(cors.headers), body: undefined });
    }
    if (cors.kind === 'preflight_rejected') return this.finish(state, errorReply('CORS_NOT_ALLOWED', requestId));

    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    if (!path.startsWith('/')) return this.finish(state, errorReply('INVALID_PATH', requestId));

    const plan = planBody(req, this.config.bodyLimitBytes, this.config.streamBodyLimitBytes);
    if (plan === 'too_large') {
      state.closeConnection = true;
      markClosing(req.socket);
      return this.finish(state, errorReply('PAYLOAD_TOO_LARGE', requestId));
    }
    let decoded: ReturnType<typeof decodeBody> = STREAMED_BODY;
    if (plan === 'stream') {
      // Read only by the handler's request_body channel, if at all (finish() closes the connection
      // of a request whose body was not read to its end).
      state.bodySource = { kind: 'streamed', req };
    } else {
      // Without a body there is nothing to wait for (no await: a step less for every GET).
      const read = plan === 'none' ? NO_BODY : await readBody(req, this.config.bodyLimitBytes, state.deadline - performance.now(), () => markClosing(req.socket));
      if (!read.ok) {
        state.closeConnection = true;
        if (read.code === 'ABORTED') return this.abort(state);
        return this.finish(state, errorReply(read.code, requestId));
      }
      state.bodySource = { kind: 'buffered', bytes: read.bytes };
      decoded = decodeBody(read.bytes, req.headers['content-type']);
    }
    // An earlier request on this connection left its body unread (413, 408): what the parser found
    // after it is not a request the engine will serve (docs/http.md#bodies).
    if (isClosing(req.socket)) return this.abandon(state);
    if (!decoded.ok) return this.finish(state, errorReply(decoded.code, requestId, decoded.message === undefined ? {} : { message: decoded.message }));

    const headers = flattenHeaders(req.headers);
    headers[this.config.requestIdHeader] = requestId;
    const request: ApiRequest = {
      path,
      method,
      path_params: emptyParams(),
      query_params: q === -1 ? emptyParams() : searchParamsToObject(new URLSearchParams(url.slice(q + 1))),
      body: 'body' in decoded ? decoded.body : undefined,
      headers,
      trigger: { type: 'http', path, method },
      context: {},
      request_id: requestId,
      ip: clientIp(req, this.config.trustProxy),
    };
    // A JSON body stays text until something reads it (apiRequestWithJsonBody).
    const apiRequest = 'json' in decoded ? apiRequestWithJsonBody(request, decoded.json) : request;
    state.apiRequest = apiRequest;
    let routing = this.deps.table.current();
    state.routing = routing;

    // onRequest runs before matching; its patches to path or method change what is matched.
    // Before matching, a restricted middleware runs only if the request as it came matches its
    // principal's route (matched here only when some middleware is restricted).
    const early = routing.middleware.hasRestricted ? routing.router.match(apiRequest.method, apiRequest.path) : undefined;
    const onRequestIds = this.phases.selectIds(routing, 'onRequest', apiRequest.path, early?.kind === 'matched' ? early.match.route.principal : undefined);
    // A phase without middleware is not awaited: no promise per request for nothing to run.
    const onRequest = onRequestIds.length === 0 ? undefined : await this.phases.run(state, 'onRequest', onRequestIds, {});
    if (onRequest !== undefined) return this.finish(state, onRequest);
    // The table may have changed while onRequest ran: the route and the rest of the middleware are
    // chosen from the table as it is now, together (the router is updated in place: route-table.ts).
    if (onRequestIds.length > 0) {
      routing = this.deps.table.current();
      state.routing = routing;
    }

    const match = routing.router.match(apiRequest.method, apiRequest.path);
    if (match.kind === 'invalid_path') return this.finish(state, errorReply('INVALID_PATH', requestId));
    if (match.kind === 'not_found') return this.notFound(state, apiRequest, undefined);
    if (match.kind === 'method_not_allowed') return this.notFound(state, apiRequest, match.allow);

    const route = match.match.route;
    state.route = route;
    state.requestTrace.route(route.method, route.pattern.source);
    // A static route matched as written changes nothing the request's JSON holds (its trigger already
    // names that path and method, it has no params): the text built for onRequest stays good.
    const unchanged = apiRequest.trigger.path === route.apiPath && apiRequest.trigger.method === route.method && !hasKeys(apiRequest.path_params) && !hasKeys(match.match.params);
    apiRequest.path_params = match.match.params;
    // trigger.path is the pattern as the worker registered it (iii's registered path), not normalized.
    apiRequest.trigger = { type: 'http', path: route.apiPath, method: route.method };
    if (!unchanged) requestChanged(apiRequest);
    const matchedRoute = { function_id: route.functionId, path_pattern: route.pattern.source };

    // preHandler middleware, then the condition, then the trigger's own middleware_function_ids in
    // list order: iii runs a route's condition before its middleware (views.rs), so do we.
    const preHandlerIds = this.phases.selectIds(routing, 'preHandler', apiRequest.path, route.principal);
    const preHandler = preHandlerIds.length === 0 ? undefined : await this.phases.run(state, 'preHandler', preHandlerIds, { matchedRoute });
    if (preHandler !== undefined) return this.finish(state, preHandler);

    if (route.conditionFunctionId !== undefined) {
      const condition = await this.invoke(route.conditionFunctionId, apiRequest, state, 'condition');
      if (!condition.ok) return this.finish(state, await this.phases.handlerFailure(state, condition.failure, matchedRoute));
      if (condition.value === false) {
        return this.finish(state, errorReply('CONDITION_NOT_MET', requestId, { extra: { skipped: true } }));
      }
    }

    if (route.middlewareFunctionIds !== undefined && route.middlewareFunctionIds.length > 0) {
      const routeMiddleware = await this.phases.run(state, 'preHandler', route.middlewareFunctionIds, { matchedRoute });
      if (routeMiddleware !== undefined) return this.finish(state, routeMiddleware);
    }

    const answer = await this.invokeHandler(state, route.functionId, apiRequest, route.metadata);
    if (answer.kind === 'streaming') return this.streamed(state, answer.ended);
    if (answer.kind === 'empty') return this.finish(state, { status: answer.status, headers: answer.headers, body: undefined });
    const outcome = answer.outcome;
    if (!outcome.ok) return this.finish(state, await this.phases.handlerFailure(state, outcome.failure, matchedRoute));

    const postIds = this.phases.selectIds(routing, 'postHandler', apiRequest.path, route.principal);
    this.finish(state, postIds.length === 0 ? responseReply(outcome.value, requestId) : await this.phases.postHandler(state, postIds, matchedRoute, outcome.value));
  }

  /**
   * Over the concurrency limit: waits for a slot within the request's deadline, as iii does (504 when
   * the deadline passes first); 503 OVERLOADED only when the waiting line is full. Returns whether the
   * request holds a slot; when not, it has been answered.
   */
  private async waitForSlot(state: RequestState): Promise<boolean> {
    const { requestId } = state;
    if (!this.admission.canWait()) {
      this.finish(state, errorReply('OVERLOADED', requestId, { headers: [['retry-after', RETRY_AFTER_SECONDS]] }));
      return false;
    }
    const result = await this.admission.wait(state.deadline - performance.now(), () => state.res.destroyed || state.req.socket.destroyed);
    if (result === 'admitted') return true;
    if (result === 'gone') this.abort(state);
    else if (result === 'closing') {
      state.closeConnection = true;
      this.finish(state, errorReply('SHUTTING_DOWN', requestId));
    } else {
      this.finish(state, errorReply('TIMEOUT', requestId, { message: 'The request deadline passed while it waited for a concurrency slot' }));
    }
    return false;
  }

  /**
   * Calls the handler with its request_body and response channels, when this engine has channels. Not
   * an async function: it returns the channels' answer itself, without a promise around it.
   */
  private invokeHandler(state: RequestState, functionId: string, apiRequest: ApiRequest, metadata: Record<string, unknown> | undefined): Promise<HandlerAnswer> {
    const registry = this.deps.channels;
    const span = state.requestTrace.invocation(functionId, 'handler');
    // The trigger's metadata goes to the handler only, not to middleware or the condition (iii's views.rs).
    const options = spanOptions(span, { deadline: state.deadline, requestId: state.requestId, trace: state.trace, ...(metadata === undefined ? {} : { metadata }) });
    if (registry === undefined) {
      return endedWith(span, this.deps.invoker.invoke(functionId, apiRequestData(apiRequest), options)).then((outcome) => ({ kind: 'outcome', outcome }));
    }
    const headOnly = state.req.method === 'HEAD';
    const channels = new RequestChannels(registry, state.bodySource, state.res, state.engineHeaders, headOnly, this.config.streamBodyLimitBytes, this.deps.streamHeap);
    // The call names its channels: data on them keeps a worker busy streaming from being dropped as frozen.
    options.channels = channels.ids;
    return channels.answer(endedWith(span, this.deps.invoker.invoke(functionId, apiRequestData(apiRequest, channels.refsJson()), options)), state.deadline);
  }

  /**
   * The handler's response is streaming: it is on the wire already, so nothing else may answer. The
   * request counts against the concurrency limit no longer (a stream may last for hours; the limit
   * bounds work in progress, not open streams); it is logged when the stream ends.
   */
  private streamed(state: RequestState, ended: Promise<StreamEnd>): void {
    state.finished = true;
    void ended.then((end) => {
      this.deps.metrics?.streamEnded(end.complete ? 'complete' : 'cut');
      this.log(state, end.status);
      if (!end.complete) this.deps.logger.info({ requestId: state.requestId, reason: end.reason }, 'response stream cut before its end');
      this.phases.onResponse(state, { status: end.status, headers: [], body: undefined });
    });
  }

  private invoke(functionId: string, apiRequest: ApiRequest, state: RequestState, role: 'condition' | 'not_found'): Promise<InvocationOutcome> {
    const span = state.requestTrace.invocation(functionId, role);
    return endedWith(span, this.deps.invoker.invoke(functionId, apiRequestData(apiRequest), spanOptions(span, { deadline: state.deadline, requestId: state.requestId })));
  }

  /**
   * No route for this request. `allow`: the path is bound for these methods only, answered 405 with
   * `Allow` (as iii does) unless a not_found_function takes every unmatched request (the spec).
   */
  private async notFound(state: RequestState, apiRequest: ApiRequest, allow: readonly string[] | undefined): Promise<void> {
    const fallback = this.config.notFoundFunction;
    if (fallback === undefined || !this.deps.invoker.has(fallback)) {
      if (fallback !== undefined) {
        this.deps.logger.warn({ functionId: fallback, requestId: state.requestId }, 'not_found_function is not served by any worker; default answer sent');
      }
      if (allow !== undefined) return this.finish(state, errorReply('METHOD_NOT_ALLOWED', state.requestId, { headers: [['allow', allow.join(', ')]] }));
      return this.finish(state, errorReply('NOT_FOUND', state.requestId));
    }
    const outcome = await this.invoke(fallback, apiRequest, state, 'not_found');
    this.finish(state, outcomeReply(outcome, state.requestId));
  }

  /** Writes the reply once; a second call (a bug path) is ignored rather than answering twice. */
  private finish(state: RequestState, reply: HttpReply): void {
    if (state.finished) return;
    state.finished = true;
    const { res, req } = state;
    if (this.deps.servedBy !== undefined) {
      state.engineHeaders['x-switchyard-served-by'] = `${this.deps.servedBy}; forwarded=${String(state.trace.forwarded)}`;
    }
    // A streamed body not read to its end leaves the connection unusable for another request.
    if (state.closeConnection || (state.bodySource?.kind === 'streamed' && !req.complete)) {
      state.engineHeaders.connection = 'close';
      closeAfterReply(req);
    }
    if (!res.headersSent && !res.destroyed) writeReply(res, reply, state.engineHeaders);
    if (reply.errorCode !== undefined) this.deps.metrics?.errorReply(reply.errorCode);
    if (reply.droppedHeaders !== undefined) {
      this.deps.logger.warn({ requestId: state.requestId, functionId: state.route?.functionId, dropped: reply.droppedHeaders }, 'invalid response headers dropped; the rest was sent');
    }
    this.log(state, reply.status);
    try {
      this.phases.onResponse(state, reply);
    } catch (err) {
      // The reply is already out: a failure here must not reach the request's error path.
      this.deps.logger.error({ err, requestId: state.requestId }, 'onResponse middleware could not start');
    }
  }

  private abort(state: RequestState): void {
    state.finished = true;
    state.res.destroy();
    this.log(state, 499);
  }

  /** Never answered: the connection is closing for an earlier request, whose answer must still go out. */
  private abandon(state: RequestState): void {
    state.finished = true;
    this.log(state, 499);
  }

  private log(state: RequestState, status: number): void {
    const elapsedMs = performance.now() - state.startedAt;
    const { trace } = state;
    state.requestTrace.end(status);
    this.deps.metrics?.request(state.route?.pattern.source, state.req.method ?? 'GET', status, elapsedMs / 1000, trace.forwarded);
    // Build the access line only when it will be written (a warn-level engine skips it entirely).
    if (!this.deps.logger.isLevelEnabled(status >= 500 ? 'warn' : 'info')) return;
    const line = {
      requestId: state.requestId,
      method: state.req.method,
      path: state.req.url,
      route: state.route?.pattern.source,
      functionId: state.route?.functionId,
      status,
      durationMs: Math.round(elapsedMs * 100) / 100,
      forwarded: trace.forwarded,
      worker: trace.forwarded ? trace.peerId : trace.workerId,
      trace_id: state.requestTrace.traceId,
      span_id: state.requestTrace.spanId,
    };
    if (status >= 500) this.deps.logger.warn(line, 'request');
    else this.deps.logger.info(line, 'request');
  }
}

function hasKeys(params: Record<string, string>): boolean {
  for (const _ in params) return true;
  return false;
}

/** A header's single value (Node joins repeated ones for most headers; these two are single-valued). */
function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

