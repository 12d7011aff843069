import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { Invoker } from '../invocation/invoker.js';
import { encodeInvocationResult } from '../protocol/encode.js';
import type { InvokeFunctionMessage } from '../protocol/messages.js';
import type { EngineCaller, EngineFunctions } from './engine-functions.js';
import { callReply } from './worker-call-reply.js';
import { enqueueCall } from './worker-enqueue.js';
import type { WorkerSession } from './worker-session.js';
import type { TraceNotes } from './local-invoker.js';
import type { CallBudget } from './call-budget.js';

/** What the calls a worker makes need of the engine (a part of WorkerConnectionDeps). */
export interface WorkerCallDeps {
  invoker: Invoker;
  /** Deadline for calls a worker makes to another worker through the engine. */
  workerCallTimeoutMs: number;
  /** Functions the engine serves itself (`engine::…`); a call to one never reaches the invoker. */
  engineFunctions: EngineFunctions;
  /** A function's metadata as the cluster table holds it (expose_functions' metadata filters). */
  functionMetadata?: (functionId: string) => Record<string, unknown> | undefined;
  /** max_calls_in_flight or max_listener_call_bytes refused a call (metrics). */
  onLimit?: (kind: 'calls_in_flight' | 'listener_call_bytes') => void;
  /** What the calls of this connection's listener hold in this process (max_listener_call_bytes). */
  listenerCalls?: CallBudget;
  /** Where the traces workers use are noted, to name the worker of their log records (observability/trace-owners.ts). */
  traces?: TraceNotes;
}

/** The connection the calls come from: who calls (engine functions get it), its session, its socket. */
export interface WorkerCallSource extends EngineCaller {
  readonly session: WorkerSession;
  send(frame: string): boolean;
}

/**
 * The calls one worker makes (`invokefunction` from it): the listener's RBAC first, then its
 * middleware (iii's order, engine/src/engine/mod.rs), then an engine function or the invoker, within
 * max_calls_in_flight. Every answer goes back on the worker's socket under the id it asked with.
 */
export class WorkerCalls {
  /** Calls made through the invoker that have not been answered yet. */
  private inFlight = 0;

  constructor(
    private readonly source: WorkerCallSource,
    private readonly deps: WorkerCallDeps,
    private readonly logger: Logger,
  ) {}

  /** One `invokefunction` from the worker; `bytes` is the size of its frame (what the call holds while in flight). */
  handle(message: InvokeFunctionMessage, bytes = 0): void {
    const invocationId = message.invocation_id;
    // A worker calling under a trace uses it too: a trace the callee also gets is then shared, not the callee's alone.
    if (message.traceparent !== undefined) this.deps.traces?.noteTraceparent(message.traceparent, this.source.id);
    const session = this.source.session;
    if (session.policy.rbac !== undefined) {
      if (!session.mayCall(message.function_id, this.deps.functionMetadata?.(message.function_id))) {
        this.logger.info({ functionId: message.function_id }, 'call refused by the listener\'s RBAC');
        if (invocationId !== undefined) this.source.send(encodeInvocationResult(invocationId, message.function_id, { ok: false, error: session.forbidden(message.function_id) }));
        return;
      }
    }
    const middlewareId = session.policy.middlewareFunctionId;
    if (middlewareId !== undefined && !message.function_id.startsWith('engine::')) {
      // iii's listener middleware: it gets the call instead, and decides whether to make it.
      const middlewareInput = { function_id: message.function_id, payload: message.data, action: message.action ?? null, context: session.auth.context };
      const middlewareCall: InvokeFunctionMessage = { ...message, function_id: middlewareId, data: middlewareInput };
      // The middleware is called, not enqueued: the action is its input's business (iii's order).
      if (message.action?.type === 'enqueue') delete middlewareCall.action;
      this.callThrough(middlewareCall, invocationId, message.function_id, bytes, false);
      return;
    }
    if (message.action?.type === 'enqueue') {
      this.enqueue(message, invocationId, bytes);
      return;
    }
    this.callThrough(message, invocationId, message.function_id, bytes);
  }

  /**
   * Takes the call's bytes from its listener's budget; past the budget the call is answered at once
   * with `too_many_calls` (or, without a reply, dropped with a warning) and false is returned.
   */
  private admit(bytes: number, invocationId: string | undefined, replyId: string): boolean {
    const budget = this.deps.listenerCalls;
    if (budget === undefined || budget.take(bytes)) return true;
    this.deps.onLimit?.('listener_call_bytes');
    const message = `the calls of this worker's listener hold max_listener_call_bytes (${budget.maxBytes}) in this process already`;
    if (invocationId !== undefined) this.source.send(encodeInvocationResult(invocationId, replyId, { ok: false, error: { code: 'too_many_calls', message } }));
    else this.logger.warn({ functionId: replyId }, `call without a reply dropped: ${message}`);
    return false;
  }

  private release(bytes: number): void {
    this.deps.listenerCalls?.give(bytes);
  }

  /** `action: {type: "enqueue"}`: handed to the queue's provider, never run inline (worker-enqueue.ts). */
  private enqueue(message: InvokeFunctionMessage, invocationId: string | undefined, bytes: number): void {
    if (!this.admit(bytes, invocationId, message.function_id)) return;
    const deps = { invoker: this.deps.invoker, engineFunctions: this.deps.engineFunctions, timeoutMs: this.deps.workerCallTimeoutMs };
    void enqueueCall(message, this.source, deps)
      .then((reply) => {
        if (invocationId !== undefined) this.source.send(encodeInvocationResult(invocationId, message.function_id, reply));
        else if (!reply.ok) this.logger.warn({ functionId: message.function_id, reason: reply.error.message }, 'enqueue without a reply failed');
      })
      .catch((err: unknown) => this.logger.error({ err }, 'enqueue failed'))
      .finally(() => this.release(bytes));
  }

  /**
   * Makes a worker's call; the answer names `replyId` (the function the worker asked for). The
   * listener middleware's call is the engine's, so its payload does not name a caller (as iii).
   */
  private callThrough(message: InvokeFunctionMessage, invocationId: string | undefined, replyId: string, bytes: number, namesCaller = true): void {
    const engineFunction = this.deps.engineFunctions.get(message.function_id);
    if (engineFunction !== undefined) {
      if (!this.admit(bytes, invocationId, replyId)) return;
      void this.deps.engineFunctions
        .call(engineFunction, message.data, this.source)
        .then((result) => {
          if (invocationId !== undefined && message.action?.type !== 'void') {
            this.source.send(encodeInvocationResult(invocationId, replyId, result));
          }
        })
        .finally(() => this.release(bytes));
      return;
    }
    // As iii (spawn_invoke_function): an object payload names its caller; the caller's metadata goes on.
    const data = namesCaller ? withCaller(message.data, this.source.id) : message.data;
    if (invocationId === undefined || message.action?.type === 'void') {
      if (!this.deps.invoker.fire(message.function_id, data, message.metadata)) {
        this.logger.warn({ functionId: message.function_id }, 'fire-and-forget call dropped: no worker serves it');
      }
      return;
    }
    if (this.inFlight >= this.source.session.policy.limits.maxCallsInFlight) {
      this.deps.onLimit?.('calls_in_flight');
      this.source.send(
        encodeInvocationResult(invocationId, replyId, {
          ok: false,
          error: { code: 'too_many_calls', message: `the worker has max_calls_in_flight (${this.source.session.policy.limits.maxCallsInFlight}) calls in flight already` },
        }),
      );
      return;
    }
    if (!this.admit(bytes, invocationId, replyId)) return;
    this.inFlight++;
    const deadline = performance.now() + this.deps.workerCallTimeoutMs;
    // The caller's trace context goes on with its call (iii-sdk sends traceparent and baggage).
    const options = {
      deadline,
      ...(message.traceparent === undefined ? {} : { traceparent: message.traceparent }),
      ...(message.baggage === undefined ? {} : { baggage: message.baggage }),
      ...(message.metadata === undefined ? {} : { metadata: message.metadata }),
    };
    this.deps.invoker
      .invoke(message.function_id, data, options)
      .then((outcome) => this.source.send(encodeInvocationResult(invocationId, replyId, callReply(outcome))))
      .catch((err: unknown) => this.logger.error({ err }, 'worker-to-worker invocation failed'))
      .finally(() => {
        this.inFlight--;
        this.release(bytes);
      });
  }
}

/**
 * A worker-to-worker call's payload with `_caller_worker_id` set to the calling worker's id, when the
 * payload is a JSON object (iii 0.22.1 adds it the same way; other payloads go as they are).
 */
export function withCaller(data: unknown, callerWorkerId: string): unknown {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return data;
  return { ...(data as Record<string, unknown>), _caller_worker_id: callerWorkerId };
}
