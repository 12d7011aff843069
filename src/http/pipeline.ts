import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { ApiConfig } from '../config/types.js';
import type { InvocationFailure, InvocationOutcome, Invoker } from '../invocation/invoker.js';
import type { HttpRoute, RouteTable } from '../routing/route-table.js';
import type { ApiRequest } from './api-request.js';
import { clientIp, flattenHeaders } from './api-request.js';
import { decodeBody, readBody, searchParamsToObject } from './body.js';
import { CorsPolicy } from './cors.js';
import { resolveRequestId } from './request-id.js';
import type { HttpReply } from './response.js';
import { errorReply, mapApiResponse, writeReply } from './response.js';

export interface PipelineDeps {
  config: ApiConfig;
  table: RouteTable;
  invoker: Invoker;
  logger: Logger;
}

const RETRY_AFTER_SECONDS = '1';
const EMPTY_PARAMS: Record<string, string> = Object.freeze(Object.create(null) as Record<string, string>);

/** Per-request state that the steps share; lives only as long as the request. */
interface RequestState {
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  startedAt: number;
  deadline: number;
  engineHeaders: Record<string, string>;
  route: HttpRoute | undefined;
  /** Set when the engine must not reuse the connection (unread body). */
  closeConnection: boolean;
}

/**
 * The request lifecycle (docs/http.md): admission → CORS → route match → body → condition →
 * handler → response. Every wait is bounded by the request's single deadline.
 */
export class HttpPipeline {
  private inFlight = 0;
  private draining = false;
  private readonly cors: CorsPolicy;
  private readonly config: ApiConfig;

  constructor(private readonly deps: PipelineDeps) {
    this.config = deps.config;
    this.cors = new CorsPolicy(deps.config.cors);
  }

  get activeRequests(): number {
    return this.inFlight;
  }

  /** From now on new requests get 503 SHUTTING_DOWN; requests already admitted finish. */
  startDraining(): void {
    this.draining = true;
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
      route: undefined,
      closeConnection: false,
    };
    this.run(state).catch((err: unknown) => {
      this.deps.logger.error({ err, requestId }, 'request failed inside the engine');
      this.finish(state, errorReply('INTERNAL_ERROR', requestId));
    });
  };

  private async run(state: RequestState): Promise<void> {
    const { req, requestId } = state;
    const method = req.method ?? 'GET';
    const cors = this.cors.decide(method, req.headers);
    if (cors.kind === 'headers') Object.assign(state.engineHeaders, cors.headers);

    if (this.draining) {
      state.closeConnection = true;
      return this.finish(state, errorReply('SHUTTING_DOWN', requestId));
    }
    if (this.inFlight >= this.config.concurrencyRequestLimit) {
      return this.finish(state, errorReply('OVERLOADED', requestId, { headers: [['retry-after', RETRY_AFTER_SECONDS]] }));
    }
    this.inFlight++;
    state.res.once('close', () => this.inFlight--);

    if (cors.kind === 'preflight') {
      return this.finish(state, { status: 204, headers: Object.entries(cors.headers), body: undefined });
    }
    if (cors.kind === 'preflight_rejected') return this.finish(state, errorReply('CORS_NOT_ALLOWED', requestId));

    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    if (!path.startsWith('/')) return this.finish(state, errorReply('INVALID_PATH', requestId));

    const match = this.deps.table.current().router.match(method, path);
    if (match.kind === 'invalid_path') return this.finish(state, errorReply('INVALID_PATH', requestId));

    const read = await readBody(req, this.config.bodyLimitBytes, state.deadline - performance.now());
    if (!read.ok) {
      state.closeConnection = true;
      if (read.code === 'ABORTED') return this.abort(state);
      return this.finish(state, errorReply(read.code, requestId));
    }
    const decoded = decodeBody(read.bytes, req.headers['content-type']);
    if (!decoded.ok) return this.finish(state, errorReply(decoded.code, requestId));

    const headers = flattenHeaders(req.headers);
    headers[this.config.requestIdHeader] = requestId;
    const apiRequest: ApiRequest = {
      path,
      method,
      path_params: EMPTY_PARAMS,
      query_params: q === -1 ? EMPTY_PARAMS : searchParamsToObject(new URLSearchParams(url.slice(q + 1))),
      body: decoded.body,
      headers,
      trigger: { type: 'http', path, method },
      context: {},
      request_id: requestId,
      ip: clientIp(req, this.config.trustProxy),
    };

    if (match.kind === 'not_found') return this.notFound(state, apiRequest);

    const route = match.match.route;
    state.route = route;
    apiRequest.path_params = match.match.params;
    apiRequest.trigger = { type: 'http', path: route.pattern.source, method: route.method };

    if (route.conditionFunctionId !== undefined) {
      const condition = await this.invoke(route.conditionFunctionId, apiRequest, state);
      if (!condition.ok) return this.finish(state, this.failureReply(condition.failure, requestId));
      if (condition.value === false) {
        return this.finish(state, errorReply('CONDITION_NOT_MET', requestId, { extra: { skipped: true } }));
      }
    }

    const outcome = await this.invoke(route.functionId, apiRequest, state);
    this.finish(state, this.outcomeReply(outcome, requestId));
  }

  private invoke(functionId: string, apiRequest: ApiRequest, state: RequestState): Promise<InvocationOutcome> {
    return this.deps.invoker.invoke(functionId, apiRequest, { deadline: state.deadline, requestId: state.requestId });
  }

  private async notFound(state: RequestState, apiRequest: ApiRequest): Promise<void> {
    const fallback = this.config.notFoundFunction;
    if (fallback === undefined || !this.deps.invoker.has(fallback)) {
      if (fallback !== undefined) {
        this.deps.logger.warn({ functionId: fallback, requestId: state.requestId }, 'not_found_function is not served by any worker; default 404 sent');
      }
      return this.finish(state, errorReply('NOT_FOUND', state.requestId));
    }
    const outcome = await this.invoke(fallback, apiRequest, state);
    this.finish(state, this.outcomeReply(outcome, state.requestId));
  }

  private outcomeReply(outcome: InvocationOutcome, requestId: string): HttpReply {
    if (!outcome.ok) return this.failureReply(outcome.failure, requestId);
    const mapped = mapApiResponse(outcome.value);
    if (!mapped.ok) return errorReply('INVALID_RESPONSE', requestId, { message: `invalid handler response: ${mapped.message}` });
    return mapped.reply;
  }

  private failureReply(failure: InvocationFailure, requestId: string): HttpReply {
    if (failure.source === 'worker') return errorReply(failure.code, requestId, { status: 500, message: failure.message });
    if (failure.code === 'FUNCTION_UNAVAILABLE') {
      return errorReply('FUNCTION_UNAVAILABLE', requestId, { headers: [['retry-after', RETRY_AFTER_SECONDS]] });
    }
    return errorReply(failure.code, requestId, { message: failure.message });
  }

  private finish(state: RequestState, reply: HttpReply): void {
    const { res, req } = state;
    if (state.closeConnection) {
      state.engineHeaders.connection = 'close';
      // The unread rest of the body must not be parsed as the next request: drop the socket once sent.
      res.once('finish', () => req.socket.destroySoon());
    }
    if (!res.headersSent && !res.destroyed) writeReply(res, reply, state.engineHeaders);
    this.log(state, reply.status);
  }

  private abort(state: RequestState): void {
    state.res.destroy();
    this.log(state, 499);
  }

  private log(state: RequestState, status: number): void {
    const durationMs = Math.round((performance.now() - state.startedAt) * 100) / 100;
    const line = {
      requestId: state.requestId,
      method: state.req.method,
      path: state.req.url,
      route: state.route?.pattern.source,
      functionId: state.route?.functionId,
      status,
      durationMs,
    };
    if (status >= 500) this.deps.logger.warn(line, 'request');
    else this.deps.logger.info(line, 'request');
  }
}
