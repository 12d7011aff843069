/**
 * Every function call the engine makes (handler, condition, middleware, not-found, and calls one
 * worker makes to another) goes through an Invoker: the local one (a worker socket on this process),
 * the cluster's forwarding one and the reconnect-grace one, all behind the same interface.
 */
export interface InvokeOptions {
  /** Absolute deadline on the `performance.now()` clock. */
  deadline: number;
  requestId?: string;
  traceparent?: string;
  baggage?: string;
  /** The invocation's `metadata` (iii's `invokefunction.metadata`): a trigger's, or what a caller gave. */
  metadata?: unknown;
  /**
   * The streaming channels whose refs the call's data hands the worker (an HTTP handler's
   * `request_body` and `response`): while the call is in flight, data on them counts as the worker's
   * sign of life for the heartbeat (docs/reliability.md).
   */
  channels?: readonly string[];
  /** Filled in by the invoker: where the call ran (for the access log and metrics). */
  trace?: InvocationTrace;
}

export interface InvocationTrace {
  forwarded: boolean;
  /** The local worker connection that ran it. */
  workerId?: string;
  /** The peer it was forwarded to. */
  peerId?: string;
}

import type { EngineFailureCode } from '../errors.js';

export type { EngineFailureCode };

export type InvocationFailure =
  /** The worker answered with an error (`code` is the worker's own, e.g. `invocation_failed`). */
  | { source: 'worker'; code: string; message: string; stacktrace?: string }
  /** The engine could not get an answer. */
  | { source: 'engine'; code: EngineFailureCode; message: string };

export type InvocationOutcome =
  /**
   * `frame`: the worker's invocationresult frame the value was decoded from, as received, when the
   * value is exactly what it says (set by the worker connection only). A forward server sends those
   * bytes back to the caller's peer instead of serialising the value again (forward-messages.ts).
   */
  | { ok: true; value: unknown; frame?: Buffer }
  | { ok: false; failure: InvocationFailure };

export interface Invoker {
  invoke(functionId: string, data: unknown, options: InvokeOptions): Promise<InvocationOutcome>;
  /** Fire and forget (`action: {type: "void"}`): returns whether a worker was found to send it to. */
  fire(functionId: string, data: unknown, metadata?: unknown): boolean;
  /** Whether any connected worker, anywhere the invoker reaches, serves the function. */
  has(functionId: string): boolean;
}

export function engineFailure(code: EngineFailureCode, message: string): InvocationOutcome {
  return { ok: false, failure: { source: 'engine', code, message } };
}
