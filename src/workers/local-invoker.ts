import { performance } from 'node:perf_hooks';
import type { InvocationOutcome, InvokeOptions, Invoker } from '../invocation/invoker.js';
import { engineFailure } from '../invocation/invoker.js';
import type { HubMember, WorkerHub } from './worker-hub.js';

/** What the local invoker calls on a connection (WorkerConnection; tests pass their own). */
export interface InvokableMember extends HubMember {
  invoke(functionId: string, data: unknown, timeoutMs: number, trace?: { traceparent?: string; baggage?: string; metadata?: unknown; channels?: readonly string[] }): Promise<InvocationOutcome>;
  fire(functionId: string, data: unknown, metadata?: unknown): boolean;
}

/** Where the engine notes which worker it sent each trace to (observability/trace-owners.ts). */
export interface TraceNotes {
  noteTraceparent(traceparent: string, workerId: string): void;
}

/** Invokes functions served by workers connected to this process. */
export class LocalInvoker<C extends InvokableMember = InvokableMember> implements Invoker {
  constructor(
    private readonly hub: WorkerHub<C>,
    /** With workers' log lines printed: each traced invocation's worker, to name the worker of their log records. */
    private readonly traces?: TraceNotes,
  ) {}

  invoke(functionId: string, data: unknown, options: InvokeOptions): Promise<InvocationOutcome> {
    const connection = this.hub.pickOwner(functionId);
    if (connection === undefined) {
      return Promise.resolve(engineFailure('FUNCTION_UNAVAILABLE', `no connected worker serves ${functionId}`));
    }
    const remainingMs = options.deadline - performance.now();
    if (remainingMs <= 0) {
      return Promise.resolve(engineFailure('TIMEOUT', `deadline passed before ${functionId} was called`));
    }
    if (options.trace !== undefined) options.trace.workerId = connection.id;
    if (options.traceparent !== undefined) this.traces?.noteTraceparent(options.traceparent, connection.id);
    return connection.invoke(functionId, data, remainingMs, options);
  }

  fire(functionId: string, data: unknown, metadata?: unknown): boolean {
    const connection = this.hub.pickOwner(functionId);
    if (connection === undefined) return false;
    return connection.fire(functionId, data, metadata);
  }

  has(functionId: string): boolean {
    return this.hub.has(functionId);
  }
}
