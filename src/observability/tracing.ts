import type { Logger } from 'pino';
import type { ObservabilityConfig } from '../config/types.js';
import type { InvokeOptions } from '../invocation/invoker.js';
import type { TraceContext } from './trace-context.js';
import { requestTraceContext } from './trace-context.js';
import type { InvocationSpan, RequestTrace, Tracing, TracingCounters } from './tracing-api.js';

export type { InvocationSpan, RequestTrace, Tracing, TracingCounters };

/**
 * The engine's tracing (docs/observability.md). Two implementations behind one interface:
 * - pass-through (no exporter configured): the request's W3C context goes to the workers as it came
 *   (trace-context.ts); no spans;
 * - exporting (iii-observability with `exporter: otlp` or `both`; otel-export.ts): a server span per
 *   request and a child span per invocation (handler, condition, each middleware) and per forwarded
 *   call, with the official OpenTelemetry SDK, exported over OTLP/HTTP in bounded batches. Workers'
 *   spans are children of the invocation spans, so one trace runs from the client through every hop.
 *
 * The OpenTelemetry SDK is loaded only when the engine exports (`ready()` loads it before the engine
 * serves): without a collector a child does not carry its modules (docs/performance.md, "Memory").
 */

/**
 * An invocation's options with its span's trace fields (none without a span). Built field by field:
 * it runs for every invocation, where spreading a fresh object per call showed in profiles.
 */
export function spanOptions(span: InvocationSpan | undefined, options: InvokeOptions): InvokeOptions {
  if (span === undefined) return options;
  options.traceparent = span.traceparent;
  if (span.baggage !== undefined) options.baggage = span.baggage;
  return options;
}

/** Ends the invocation's span with its outcome; a pass-through span adds no step to the call. */
export function endedWith<T extends { ok: true } | { ok: false; failure: { code: string; message: string } }>(span: InvocationSpan, outcome: Promise<T>): Promise<T> {
  if (!span.recording) return outcome;
  return outcome.then((result) => {
    span.end(result.ok ? undefined : result.failure);
    return result;
  });
}

/**
 * The OTLP/HTTP endpoint when iii-observability exports (`enabled` not false, `exporter` otlp or
 * both), else undefined: export off, trace context passed through.
 */
export function otlpEndpoint(config: ObservabilityConfig): string | undefined {
  if (config.enabled === false || (config.exporter !== 'otlp' && config.exporter !== 'both')) return undefined;
  return typeof config.endpoint === 'string' && config.endpoint !== '' ? config.endpoint : 'http://localhost:4318';
}

/**
 * A request without spans. It is also the span each of its invocations hands on (the same context,
 * nothing recorded): one object per request, not two. Both `end`s do nothing.
 */
class PassThroughRequest implements RequestTrace, InvocationSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceparent: string;
  readonly baggage?: string;
  readonly recording = false;

  constructor(context: TraceContext) {
    this.traceId = context.traceId;
    this.spanId = context.spanId;
    this.traceparent = context.traceparent;
    if (context.baggage !== undefined) this.baggage = context.baggage;
  }

  invocation(): InvocationSpan {
    return this;
  }

  route(): void {}

  end(): void {}
}

export class PassThroughTracing implements Tracing {
  constructor(private readonly sampleRatio = 1) {}

  request(traceparent: string | undefined, baggage: string | undefined): RequestTrace {
    return new PassThroughRequest(requestTraceContext(traceparent, baggage, this.sampleRatio));
  }

  forwarded(): undefined {
    return undefined;
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * The exporting tracer once its modules have loaded. The engine awaits `ready()` before it listens
 * for anything it would trace, so nothing asks for a span before then.
 */
class DeferredTracing implements Tracing {
  private loaded: Tracing | undefined;
  private readonly loading: Promise<Tracing>;

  constructor(load: () => Promise<Tracing>) {
    this.loading = load().then((tracing) => (this.loaded = tracing));
    // A failed load is reported by ready() (the engine does not start), not as an unhandled rejection.
    this.loading.catch(() => undefined);
  }

  private get tracer(): Tracing {
    if (this.loaded === undefined) throw new Error('tracing used before ready()');
    return this.loaded;
  }

  request(traceparent: string | undefined, baggage: string | undefined, method: string, target: string, tracestate?: string): RequestTrace {
    return this.tracer.request(traceparent, baggage, method, target, tracestate);
  }

  forwarded(traceparent: string | undefined, baggage: string | undefined, functionId: string): InvocationSpan | undefined {
    return this.tracer.forwarded(traceparent, baggage, functionId);
  }

  async ready(): Promise<void> {
    await this.loading;
  }

  async shutdown(): Promise<void> {
    const tracing = await this.loading.catch(() => undefined);
    await tracing?.shutdown();
  }
}

/** Tracing as the observability config asks: exporting when enabled with an OTLP exporter, else pass-through. */
export function createTracing(config: ObservabilityConfig, logger: Logger, counters?: TracingCounters): Tracing {
  const endpoint = otlpEndpoint(config);
  // Without a collector nobody receives spans (the engine's or the workers' /otel relay): unless the
  // file sets sampling_ratio, new traces start unsampled (flag 00), so workers' SDKs record none
  // (docs/observability.md#sampling). Trace ids still flow to workers and into the access log.
  if (endpoint === undefined) return new PassThroughTracing(typeof config.sampling_ratio === 'number' ? config.sampling_ratio : 0);
  if (/:4317\/?$/.test(endpoint)) {
    logger.warn({ endpoint }, 'iii-observability endpoint is the OTLP/gRPC port 4317; Switchyard exports OTLP/HTTP (usually port 4318)');
  }
  return new DeferredTracing(async () => {
    const { ExportingTracing } = await import('./otel-export.js');
    return new ExportingTracing(config, endpoint, counters);
  });
}
