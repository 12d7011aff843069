import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { MiddlewarePhase } from '../config/types.js';
import type { InvocationFailure } from '../invocation/invoker.js';
import type { InvocationSpan } from '../observability/tracing.js';
import type { RoutingState } from '../routing/route-table.js';
import type { ApiRequest } from './api-request.js';
import type { MiddlewareCall, MiddlewareRunner, PhaseOutcome } from './middleware-runner.js';
import type { RequestState } from './request-state.js';
import type { HttpReply } from './response.js';
import { errorReply } from './response.js';
import { failureReply, responseReply, sentResponse } from './replies.js';

/**
 * onError/onTimeout run when the deadline may already be gone: they get at least this long, so a
 * timeout can still be answered by middleware (bounded, and never more than default_timeout).
 */
const ERROR_PHASE_BUDGET_MS = 1000;
const NO_IDS: readonly string[] = Object.freeze([]);

/** What the handler (or a middleware standing in for it) answered, before it becomes HTTP. */
type PhaseAnswer = { kind: 'response'; value: unknown } | { kind: 'reply'; reply: HttpReply };

/**
 * The middleware phases around one request (docs/middleware.md): which middleware a phase runs, and
 * what each phase's outcome means for the reply. The pipeline (pipeline.ts) decides when each runs.
 */
export class RequestPhases {
  private readonly errorPhaseBudgetMs: number;

  constructor(
    private readonly middleware: MiddlewareRunner,
    private readonly logger: Logger,
    private readonly defaultTimeoutMs: number,
  ) {
    this.errorPhaseBudgetMs = Math.min(ERROR_PHASE_BUDGET_MS, defaultTimeoutMs);
  }

  /**
   * The middleware of a phase for a path. Middleware registered through a listener with `rbac` runs only
   * on routes of its own principal (docs/security.md#middleware-scope): `principal` says whose route this is.
   */
  selectIds(routing: RoutingState, phase: MiddlewarePhase, path: string, principal: string | undefined): readonly string[] {
    let bindings = routing.middleware.select(phase, path);
    if (routing.middleware.hasRestricted && bindings.length > 0) {
      bindings = bindings.filter((binding) => binding.restrictedTo === undefined || binding.restrictedTo === principal);
    }
    return bindings.length === 0 ? NO_IDS : bindings.map((binding) => binding.functionId);
  }

  /**
   * Runs a request phase (onRequest, preHandler). Returns the reply that ends the request (a
   * `respond`, a failure), or undefined to go on. The pipeline calls it only when the phase has
   * middleware (an empty phase costs no promise).
   */
  async run(
    state: RequestState,
    phase: 'onRequest' | 'preHandler',
    functionIds: readonly string[],
    extra: Pick<MiddlewareCall, 'matchedRoute'>,
  ): Promise<HttpReply | undefined> {
    const request = state.apiRequest as ApiRequest;
    const outcome = await this.middleware.run(functionIds, { phase, request, ...extra }, state.deadline, state.requestId, this.spans(state));
    if (outcome.kind === 'failed' && outcome.timedOut) {
      return this.timeoutReply(state, `deadline passed in ${phase} middleware ${outcome.functionId}`, extra.matchedRoute);
    }
    const answer = this.answerFromPhase(state, phase, outcome);
    if (answer === undefined) return undefined;
    return answer.kind === 'reply' ? answer.reply : responseReply(answer.value, state.requestId);
  }

  /**
   * `respond` becomes the answer; a middleware that threw is answered as iii does (500, the worker's
   * code and message, e.g. `invocation_failed`); any other failure is 500 MIDDLEWARE_FAILED;
   * `continue` is undefined.
   */
  private answerFromPhase(state: RequestState, phase: MiddlewarePhase, outcome: PhaseOutcome): PhaseAnswer | undefined {
    if (outcome.kind === 'continue') return undefined;
    if (outcome.kind === 'respond') return { kind: 'response', value: outcome.response };
    this.logger.warn(
      { requestId: state.requestId, phase, functionId: outcome.functionId, reason: outcome.reason },
      'middleware failed',
    );
    if (outcome.failure !== undefined) return { kind: 'reply', reply: failureReply(outcome.failure, state.requestId) };
    return {
      kind: 'reply',
      reply: errorReply('MIDDLEWARE_FAILED', state.requestId, { message: `middleware ${outcome.functionId} failed in ${phase}` }),
    };
  }

  /** A failed handler or condition: onTimeout for the deadline, onError for everything else. */
  async handlerFailure(
    state: RequestState,
    failure: InvocationFailure,
    matchedRoute: MiddlewareCall['matchedRoute'],
  ): Promise<HttpReply> {
    if (failure.source === 'engine' && failure.code === 'TIMEOUT') {
      return this.timeoutReply(state, failure.message, matchedRoute);
    }
    const fallback = failureReply(failure, state.requestId);
    return this.errorPhase(state, 'onError', { code: failure.code, message: failure.message }, matchedRoute, fallback);
  }

  timeoutReply(state: RequestState, message: string, matchedRoute: MiddlewareCall['matchedRoute']): Promise<HttpReply> {
    const fallback = errorReply('TIMEOUT', state.requestId, { message });
    return this.errorPhase(state, 'onTimeout', { code: 'TIMEOUT', message }, matchedRoute, fallback);
  }

  /**
   * onError/onTimeout: a `respond` replaces the default reply; anything else (continue, failure) keeps
   * the default. Error phases never trigger another error phase, so there are no loops.
   */
  private async errorPhase(
    state: RequestState,
    phase: 'onError' | 'onTimeout',
    error: { code: string; message: string },
    matchedRoute: MiddlewareCall['matchedRoute'],
    fallback: HttpReply,
  ): Promise<HttpReply> {
    const request = state.apiRequest;
    if (request === undefined || state.routing === undefined) return fallback;
    const ids = this.selectIds(state.routing, phase, request.path, state.route?.principal);
    if (ids.length === 0) return fallback;
    const deadline = Math.max(state.deadline, performance.now() + this.errorPhaseBudgetMs);
    const call: MiddlewareCall = { phase, request, error };
    if (matchedRoute !== undefined) call.matchedRoute = matchedRoute;
    const outcome = await this.middleware.run(ids, call, deadline, state.requestId, this.spans(state));
    if (outcome.kind === 'respond') return responseReply(outcome.response, state.requestId);
    if (outcome.kind === 'failed') {
      this.logger.warn(
        { requestId: state.requestId, phase, functionId: outcome.functionId, reason: outcome.reason },
        'error-phase middleware failed; default response sent',
      );
    }
    return fallback;
  }

  /**
   * postHandler: the handler's result goes through the phase; a `respond` replaces it, a failure is
   * 500 MIDDLEWARE_FAILED, and running out of deadline is a timeout as in the request phases (onTimeout,
   * then 504), not a middleware failure.
   */
  async postHandler(state: RequestState, functionIds: readonly string[], matchedRoute: MiddlewareCall['matchedRoute'], response: unknown): Promise<HttpReply> {
    const request = state.apiRequest as ApiRequest;
    const call: MiddlewareCall = { phase: 'postHandler', request, response };
    if (matchedRoute !== undefined) call.matchedRoute = matchedRoute;
    const post = await this.middleware.run(functionIds, call, state.deadline, state.requestId, this.spans(state));
    if (post.kind === 'failed' && post.timedOut) {
      return this.timeoutReply(state, `deadline passed in postHandler middleware ${post.functionId}`, matchedRoute);
    }
    const answer = this.answerFromPhase(state, 'postHandler', post) ?? { kind: 'response', value: response };
    return answer.kind === 'reply' ? answer.reply : responseReply(answer.value, state.requestId);
  }

  /** onResponse runs after the reply is handed to the socket; it can neither delay nor change it. */
  onResponse(state: RequestState, reply: HttpReply): void {
    const request = state.apiRequest;
    if (request === undefined || state.routing === undefined) return;
    const ids = this.selectIds(state.routing, 'onResponse', request.path, state.route?.principal);
    if (ids.length === 0) return;
    const call: MiddlewareCall = { phase: 'onResponse', request, response: sentResponse(reply) };
    if (state.route !== undefined) {
      call.matchedRoute = { function_id: state.route.functionId, path_pattern: state.route.pattern.source };
    }
    const deadline = performance.now() + this.defaultTimeoutMs;
    this.middleware
      .run(ids, call, deadline, state.requestId, this.spans(state))
      .then((outcome) => {
        if (outcome.kind === 'failed') {
          this.logger.warn(
            { requestId: state.requestId, functionId: outcome.functionId, reason: outcome.reason },
            'onResponse middleware failed (response already sent)',
          );
        }
      })
      .catch((err: unknown) => this.logger.error({ err, requestId: state.requestId }, 'onResponse middleware crashed'));
  }

  /** Middleware calls' spans: one child of the request's span per call. */
  private spans(state: RequestState): (functionId: string) => InvocationSpan {
    return (functionId) => state.requestTrace.invocation(functionId, 'middleware');
  }
}
