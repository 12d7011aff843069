/**
 * What the engine asks of its tracer (tracing.ts has the two implementations and says when each
 * runs). Its own module so that the exporting tracer (otel-export.ts, loaded on demand) and the
 * module that loads it share the interfaces without importing each other.
 */
export interface InvocationSpan {
  /** What the worker (or the peer) gets. */
  readonly traceparent: string;
  readonly baggage?: string;
  /** False for pass-through tracing: `end` does nothing, so callers need not wait to call it. */
  readonly recording: boolean;
  end(failure?: { code: string; message: string }): void;
}

export interface RequestTrace {
  readonly traceId: string;
  readonly spanId: string;
  readonly baggage?: string;
  /** A child span for one invocation of the request. */
  invocation(functionId: string, role: 'handler' | 'condition' | 'middleware' | 'not_found'): InvocationSpan;
  route(method: string, pattern: string): void;
  end(status: number): void;
}

export interface Tracing {
  request(traceparent: string | undefined, baggage: string | undefined, method: string, target: string, tracestate?: string): RequestTrace;
  /** On the peer that owns the worker: a span for a call forwarded here, child of the caller's. */
  forwarded(traceparent: string | undefined, baggage: string | undefined, functionId: string): InvocationSpan | undefined;
  /** Resolves once the tracer can trace (loads the exporter's modules when it exports). */
  ready(): Promise<void>;
  shutdown(): Promise<void>;
}

/** What the exporting tracer reports: spans sent, dropped (queue full) or lost (export failed). */
export interface TracingCounters {
  spansExported(count: number): void;
  spansDropped(reason: 'queue_full' | 'export_failed', count: number): void;
}
