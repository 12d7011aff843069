import type { Logger } from 'pino';
import type { ObservabilityConfig } from '../config/types.js';
import { isPlainObject } from '../values.js';
import type { TelemetryKind, TelemetrySource } from './otlp-relay.js';

type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';

/** OTLP severity numbers: 1–4 trace, 5–8 debug, 9–12 info, 13–16 warn, 17–20 error, 21–24 fatal. */
function levelOf(severity: unknown): Level {
  const n = typeof severity === 'number' ? severity : 0;
  if (n >= 21) return 'fatal';
  if (n >= 17) return 'error';
  if (n >= 13) return 'warn';
  if (n >= 9 || n === 0) return 'info';
  if (n >= 5) return 'debug';
  return 'trace';
}

/** An OTLP JSON AnyValue as a plain value (`{stringValue}`, `{intValue}`, `{kvlistValue}`, …). */
function plainValue(value: unknown): unknown {
  if (!isPlainObject(value)) return value;
  if ('stringValue' in value) return value.stringValue;
  if ('boolValue' in value) return value.boolValue;
  if ('intValue' in value) return Number(value.intValue);
  if ('doubleValue' in value) return value.doubleValue;
  if ('bytesValue' in value) return value.bytesValue;
  if (isPlainObject(value.arrayValue)) return Array.isArray(value.arrayValue.values) ? value.arrayValue.values.map(plainValue) : [];
  if (isPlainObject(value.kvlistValue)) return attributes(value.kvlistValue.values);
  return undefined;
}

function attributes(list: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!Array.isArray(list)) return out;
  for (const entry of list) {
    if (isPlainObject(entry) && typeof entry.key === 'string') out[entry.key] = plainValue(entry.value);
  }
  return out;
}

const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);

/**
 * Prints the log records workers send on their telemetry socket (`LOGS` frames: OTLP JSON, what
 * iii-sdk's `Logger` emits) as lines of the engine's own log, at each record's level, with its service,
 * the function that logged (the Logger's `service.name` attribute), its trace and span ids and its data —
 * as iii 0.22.1 prints them (`logs_console_output`, on by default; engine/src/workers/observability/otel.rs).
 * Also with the worker's id (`workerId`, as on `engine::log::*` lines) once the socket's sender has
 * named it: the telemetry socket is not the worker's, and iii-sdk names its worker only in its metrics
 * (the worker gauges' `worker.id` attribute, first exported one metrics interval after it connects).
 */
export class WorkerLogPrinter {
  constructor(private readonly logger: Logger) {}

  accept(kind: TelemetryKind, json: Buffer, source?: TelemetrySource): boolean {
    if (kind === 'metrics') {
      if (source !== undefined && source.workerId === undefined) learnWorkerId(json, source);
      return false;
    }
    if (kind !== 'logs') return false;
    let request: unknown;
    try {
      request = JSON.parse(json.toString('utf8'));
    } catch {
      this.logger.debug({ bytes: json.length }, 'worker log frame is not JSON: ignored');
      return false;
    }
    if (!isPlainObject(request)) return false;
    for (const resourceLogs of list(request.resourceLogs)) {
      if (!isPlainObject(resourceLogs)) continue;
      const resource = isPlainObject(resourceLogs.resource) ? attributes(resourceLogs.resource.attributes) : {};
      for (const scopeLogs of list(resourceLogs.scopeLogs)) {
        if (!isPlainObject(scopeLogs)) continue;
        for (const record of list(scopeLogs.logRecords)) {
          if (isPlainObject(record)) this.print(record, resource, source?.workerId);
        }
      }
    }
    return true;
  }

  private print(record: Record<string, unknown>, resource: Record<string, unknown>, workerId: string | undefined): void {
    const attrs = attributes(record.attributes);
    const fields: Record<string, unknown> = { service: resource['service.name'] };
    if (workerId !== undefined) fields.workerId = workerId;
    if (resource['service.instance.id'] !== undefined) fields.serviceInstanceId = resource['service.instance.id'];
    if (attrs['service.name'] !== undefined) fields.function = attrs['service.name'];
    const traceId = nonZero(record.traceId) ?? nonZero(attrs.trace_id);
    const spanId = nonZero(record.spanId) ?? nonZero(attrs.span_id);
    if (traceId !== undefined) fields.trace_id = traceId;
    if (spanId !== undefined) fields.span_id = spanId;
    if (attrs['log.data'] !== undefined) fields.data = attrs['log.data'];
    const body = plainValue(record.body);
    this.logger[levelOf(record.severityNumber)](fields, typeof body === 'string' ? body : JSON.stringify(body ?? ''));
  }
}

const WORKER_ID_KEY = Buffer.from('"worker.id"');

/** The `worker.id` attribute of any data point of an OTLP JSON metrics frame, kept on the socket's source. */
function learnWorkerId(json: Buffer, source: TelemetrySource): void {
  if (json.indexOf(WORKER_ID_KEY) === -1) return;
  let request: unknown;
  try {
    request = JSON.parse(json.toString('utf8'));
  } catch {
    return;
  }
  if (!isPlainObject(request)) return;
  for (const resourceMetrics of list(request.resourceMetrics)) {
    if (!isPlainObject(resourceMetrics)) continue;
    for (const scopeMetrics of list(resourceMetrics.scopeMetrics)) {
      if (!isPlainObject(scopeMetrics)) continue;
      for (const metric of list(scopeMetrics.metrics)) {
        if (!isPlainObject(metric)) continue;
        for (const data of [metric.gauge, metric.sum, metric.histogram]) {
          if (!isPlainObject(data)) continue;
          for (const point of list(data.dataPoints)) {
            const id = isPlainObject(point) ? attributes(point.attributes)['worker.id'] : undefined;
            if (typeof id === 'string' && id !== '' && id.length <= 256) {
              source.workerId = id;
              return;
            }
          }
        }
      }
    }
  }
}

function nonZero(id: unknown): string | undefined {
  return typeof id === 'string' && id !== '' && !/^0+$/.test(id) ? id : undefined;
}

/** Whether workers' log records are printed: iii's `logs_console_output` (default true), unless logs or observability are off. */
export function printsWorkerLogs(config: ObservabilityConfig): boolean {
  return config.enabled !== false && config.logs_enabled !== false && config.logs_console_output !== false;
}

type TelemetrySinkLike = { accept(kind: TelemetryKind, json: Buffer, source?: TelemetrySource): boolean };

/** Several sinks for the telemetry intake: a frame is taken when any of them takes it. */
export function teeSinks(sinks: readonly TelemetrySinkLike[]): TelemetrySinkLike {
  return {
    accept(kind, json, source) {
      let taken = false;
      for (const sink of sinks) taken = sink.accept(kind, json, source) || taken;
      return taken;
    },
  };
}
