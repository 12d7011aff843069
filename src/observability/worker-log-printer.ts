import type { Logger } from 'pino';
import type { ObservabilityConfig } from '../config/types.js';
import { isPlainObject } from '../values.js';
import type { TelemetryKind, TelemetrySource } from './otlp-relay.js';
import type { TraceOwner, TraceOwnerLookup } from './trace-owners.js';

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

/** One record as it will be printed; held while its socket's worker is being asked about. */
interface Line {
  level: Level;
  fields: Record<string, unknown>;
  msg: string;
  traceId: string | undefined;
}

/** How a record's worker is found (docs/observability.md#workers-log-records). */
export interface WorkerLogAttribution {
  /** This process's recent trace → worker (observability/trace-owners.ts). */
  owners: TraceOwnerLookup;
  /**
   * A cluster child's question to the node's other processes (cluster/trace-owner-questions.ts): the
   * one worker they sent the trace to, null when several, undefined when none or no answer in time.
   * Absent on a single process, whose own map is the node's.
   */
  askSiblings?: (traceId: string) => Promise<TraceOwner>;
}

/** Questions a telemetry socket may ask its siblings before its worker is known (each about another trace). */
export const MAX_QUESTIONS_PER_SOCKET = 8;
/** Records a socket holds while its question is out; past it the oldest is printed without waiting. */
export const MAX_HELD_RECORDS = 256;

/** A trace id as the engine sends them (and the siblings are asked about). */
const TRACE_ID = /^[0-9a-f]{32}$/;

/** A socket whose worker is being asked about: what it holds and what it asked. */
interface Questioning {
  held: Line[] | undefined;
  asked: Set<string>;
}

/**
 * Prints the log records workers send on their telemetry socket (`LOGS` frames: OTLP JSON, what
 * iii-sdk's `Logger` emits) as lines of the engine's own log, at each record's level, with its service,
 * the function that logged (the Logger's `service.name` attribute), its trace and span ids and its data —
 * as iii 0.22.1 prints them (`logs_console_output`, on by default; engine/src/workers/observability/otel.rs).
 *
 * Also with the worker's id (`workerId`, as on `engine::log::*` lines) when it is known. The telemetry
 * socket is not the worker's socket and names no worker, so the id is inferred: a record written in a
 * handler carries the trace id the engine sent that handler, and the engine remembers which worker it
 * sent each recent trace to (`attribution.owners`). A record whose trace went to exactly one worker is
 * that worker's, and its socket is then known to be that worker's, for the records that carry no trace.
 * On a single process the own map is the whole node's. A cluster child sees only the traces it sent, and
 * the same trace can reach workers on several processes (worker-to-worker calls, queue jobs, a client
 * reusing a trace), so there a socket's worker is settled by asking the siblings once, holding the
 * socket's lines until the answer; after that the socket's worker names its lines. The socket's own
 * metrics name it too (iii-sdk's worker gauges carry `worker.id`, first exported one metrics interval
 * after connecting).
 */
export class WorkerLogPrinter {
  private readonly questioning = new WeakMap<TelemetrySource, Questioning>();

  constructor(
    private readonly logger: Logger,
    private readonly attribution?: WorkerLogAttribution,
  ) {}

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
          if (isPlainObject(record)) this.emit(lineOf(record, resource), source);
        }
      }
    }
    return true;
  }

  /** Prints a line with the worker found for it, or holds it while its socket's worker is asked about. */
  private emit(line: Line, source: TelemetrySource | undefined): void {
    const attribution = this.attribution;
    if (attribution === undefined || source === undefined) {
      this.write(line, source?.workerId);
      return;
    }
    const state = this.questioning.get(source);
    if (state?.held !== undefined) {
      this.hold(state, line, source);
      return;
    }
    const traceId = line.traceId;
    const local = traceId === undefined ? undefined : attribution.owners.ownerOf(traceId);
    const ask = attribution.askSiblings;
    if (ask === undefined) {
      // One process: a trace it sent to exactly one worker names the record's worker, and the socket's.
      if (typeof local === 'string') source.workerId = local;
      this.write(line, typeof local === 'string' ? local : source.workerId);
      return;
    }
    // A cluster child: a socket not yet known asks the siblings about a trace not known to be shared here.
    if (source.workerId !== undefined || traceId === undefined || local === null || !this.ask(source, state, traceId, local, ask, line)) {
      this.write(line, source.workerId);
    }
  }

  /** Starts the socket's question about `traceId`, holding `line`; false when it may not ask (budget, same trace). */
  private ask(source: TelemetrySource, state: Questioning | undefined, traceId: string, local: string | undefined, ask: (traceId: string) => Promise<TraceOwner>, line: Line): boolean {
    let questioning = state;
    if (questioning === undefined) {
      questioning = { held: undefined, asked: new Set() };
      this.questioning.set(source, questioning);
    }
    if (questioning.asked.size >= MAX_QUESTIONS_PER_SOCKET || questioning.asked.has(traceId) || !TRACE_ID.test(traceId)) return false;
    questioning.asked.add(traceId);
    questioning.held = [line];
    const settle = (siblings: TraceOwner): void => this.settle(source, questioning, local, siblings);
    ask(traceId).then(settle, () => settle(undefined));
    return true;
  }

  /** The siblings answered (or did not in time): the socket learns its worker if the node sent the trace to one, and its lines go out. */
  private settle(source: TelemetrySource, state: Questioning, local: string | undefined, siblings: TraceOwner): void {
    // Here and there together: one worker, named by this process, the siblings or both alike.
    const owner = siblings === null ? undefined : siblings === undefined ? local : local === undefined || local === siblings ? siblings : undefined;
    if (owner !== undefined && source.workerId === undefined) source.workerId = owner;
    const held = state.held ?? [];
    state.held = undefined;
    // In order; a line may start the next question (another trace), and the rest wait for it.
    for (const line of held) this.emit(line, source);
  }

  private hold(state: Questioning, line: Line, source: TelemetrySource): void {
    const held = state.held as Line[];
    if (held.length >= MAX_HELD_RECORDS) this.write(held.shift() as Line, source.workerId);
    held.push(line);
  }

  private write(line: Line, workerId: string | undefined): void {
    if (workerId !== undefined) line.fields.workerId = workerId;
    this.logger[line.level](line.fields, line.msg);
  }
}

/** A record as a line: its level, message and fields (the worker id is added when printed). */
function lineOf(record: Record<string, unknown>, resource: Record<string, unknown>): Line {
  const attrs = attributes(record.attributes);
  const fields: Record<string, unknown> = { service: resource['service.name'] };
  if (resource['service.instance.id'] !== undefined) fields.serviceInstanceId = resource['service.instance.id'];
  if (attrs['service.name'] !== undefined) fields.function = attrs['service.name'];
  const traceId = nonZero(record.traceId) ?? nonZero(attrs.trace_id);
  const spanId = nonZero(record.spanId) ?? nonZero(attrs.span_id);
  if (traceId !== undefined) fields.trace_id = traceId;
  if (spanId !== undefined) fields.span_id = spanId;
  if (attrs['log.data'] !== undefined) fields.data = attrs['log.data'];
  const body = plainValue(record.body);
  return { level: levelOf(record.severityNumber), fields, msg: typeof body === 'string' ? body : JSON.stringify(body ?? ''), traceId };
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
