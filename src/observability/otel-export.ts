import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace } from '@opentelemetry/api';
import type { Context, Span } from '@opentelemetry/api';
import { ExportResultCode, TraceState } from '@opentelemetry/core';
import type { ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import { BasicTracerProvider, ParentBasedSampler, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-base';
import type { ReadableSpan, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ObservabilityConfig } from '../config/types.js';
import type { InvocationSpan, RequestTrace, Tracing, TracingCounters } from './tracing-api.js';
import { baggageToHand, parseTraceparent } from './trace-context.js';

/**
 * The exporting tracer (tracing.ts says when it runs): spans made with the official OpenTelemetry
 * SDK and exported over OTLP/HTTP by a bounded processor. Its own module so that the SDK is loaded
 * only by engines that export.
 */

function traceparentOf(span: Span): string {
  const context = span.spanContext();
  return `00-${context.traceId}-${context.spanId}-0${context.traceFlags & TraceFlags.SAMPLED}`;
}

/**
 * The context to start a span under: the caller's remote span when its traceparent is valid (with its
 * tracestate, which the engine's spans carry on), else none.
 */
function parentContext(traceparent: string | undefined, tracestate?: string): Context {
  const parsed = parseTraceparent(traceparent);
  if (parsed === undefined) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: parsed.traceId,
    spanId: parsed.parentId,
    traceFlags: (Number.parseInt(parsed.flags, 16) & 1) === 1 ? TraceFlags.SAMPLED : TraceFlags.NONE,
    isRemote: true,
    ...(tracestate === undefined || tracestate === '' || tracestate.length > 512 ? {} : { traceState: new TraceState(tracestate) }),
  });
}

function childSpan(tracer: ReturnType<BasicTracerProvider['getTracer']>, name: string, kind: SpanKind, parent: Context, baggage: string | undefined, attributes: Record<string, string>): InvocationSpan {
  const span = tracer.startSpan(name, { kind, attributes }, parent);
  return {
    traceparent: traceparentOf(span),
    ...(baggage === undefined ? {} : { baggage }),
    recording: true,
    end: (failure) => {
      if (failure !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: `${failure.code}: ${failure.message}` });
      span.end();
    },
  };
}

class ExportingRequest implements RequestTrace {
  readonly traceId: string;
  readonly spanId: string;
  readonly baggage?: string;
  private readonly context: Context;

  constructor(
    private readonly tracer: ReturnType<BasicTracerProvider['getTracer']>,
    private readonly span: Span,
    baggage: string | undefined,
  ) {
    const spanContext = span.spanContext();
    this.traceId = spanContext.traceId;
    this.spanId = spanContext.spanId;
    if (baggage !== undefined) this.baggage = baggage;
    this.context = trace.setSpan(ROOT_CONTEXT, span);
  }

  invocation(functionId: string, role: 'handler' | 'condition' | 'middleware' | 'not_found'): InvocationSpan {
    return childSpan(this.tracer, `invoke ${functionId}`, SpanKind.CLIENT, this.context, this.baggage, { 'switchyard.function_id': functionId, 'switchyard.role': role });
  }

  route(method: string, pattern: string): void {
    this.span.updateName(`${method} ${pattern}`);
    this.span.setAttribute('http.route', pattern);
  }

  end(status: number): void {
    this.span.setAttribute('http.response.status_code', status);
    if (status >= 500) this.span.setStatus({ code: SpanStatusCode.ERROR });
    this.span.end();
  }
}

/**
 * A bounded span processor: ended sampled spans queue up to `maxQueue` (more are dropped and
 * counted), and go out in batches, one export at a time. A dead or slow collector costs telemetry,
 * never a request or unbounded memory.
 */
export class BoundedSpanProcessor implements SpanProcessor {
  private queue: ReadableSpan[] = [];
  private exporting = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly exporter: SpanExporter,
    private readonly counters: TracingCounters | undefined,
    private readonly maxQueue = 2048,
    private readonly batchSize = 512,
    intervalMs = 1000,
  ) {
    this.timer = setInterval(() => void this.flush(), intervalMs);
    this.timer.unref();
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.queue.length >= this.maxQueue) {
      this.counters?.spansDropped('queue_full', 1);
      return;
    }
    this.queue.push(span);
    if (this.queue.length >= this.batchSize) void this.flush();
  }

  private flush(): Promise<void> {
    if (this.exporting || this.queue.length === 0) return Promise.resolve();
    const batch = this.queue.splice(0, this.batchSize);
    this.exporting = true;
    return new Promise((resolve) => {
      this.exporter.export(batch, (result: ExportResult) => {
        this.exporting = false;
        if (result.code === ExportResultCode.SUCCESS) this.counters?.spansExported(batch.length);
        else this.counters?.spansDropped('export_failed', batch.length);
        resolve();
      });
    });
  }

  async forceFlush(): Promise<void> {
    while (this.queue.length > 0 && !this.exporting) await this.flush();
  }

  async shutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.forceFlush().catch(() => undefined);
    await this.exporter.shutdown();
  }
}

export class ExportingTracing implements Tracing {
  private readonly provider: BasicTracerProvider;
  private readonly tracer: ReturnType<BasicTracerProvider['getTracer']>;

  constructor(config: ObservabilityConfig, endpoint: string, counters?: TracingCounters, exporter?: SpanExporter) {
    const ratio = typeof config.sampling_ratio === 'number' ? config.sampling_ratio : 1;
    const attributes: Record<string, string> = { 'service.name': typeof config.service_name === 'string' ? config.service_name : 'switchyard' };
    for (const [key, attribute] of [
      ['service_version', 'service.version'],
      ['service_namespace', 'service.namespace'],
      ['service_instance_id', 'service.instance.id'],
    ] as const) {
      const value = config[key];
      if (typeof value === 'string' && value !== '') attributes[attribute] = value;
    }
    this.provider = new BasicTracerProvider({
      resource: new Resource(attributes),
      // The edge decides once: a client's sampled flag is kept, a new trace is sampled by the ratio.
      sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) }),
    });
    this.provider.addSpanProcessor(new BoundedSpanProcessor(exporter ?? new OTLPTraceExporter({ url: `${endpoint.replace(/\/+$/, '')}/v1/traces` }), counters));
    this.tracer = this.provider.getTracer('switchyard');
  }

  request(traceparent: string | undefined, baggage: string | undefined, method: string, target: string, tracestate?: string): RequestTrace {
    const span = this.tracer.startSpan(
      `${method}`,
      { kind: SpanKind.SERVER, attributes: { 'http.request.method': method, 'url.path': target.split('?')[0] ?? target } },
      parentContext(traceparent, tracestate),
    );
    return new ExportingRequest(this.tracer, span, baggageToHand(baggage));
  }

  forwarded(traceparent: string | undefined, baggage: string | undefined, functionId: string): InvocationSpan {
    return childSpan(this.tracer, `forwarded ${functionId}`, SpanKind.SERVER, parentContext(traceparent), baggage, { 'switchyard.function_id': functionId });
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }
}
