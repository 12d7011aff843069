import type { Logger } from 'pino';
import type { ObservabilityConfig } from '../config/types.js';
import { otlpEndpoint } from './tracing.js';
import { WarnThrottle } from './warn-throttle.js';

/** The three kinds of OTLP data a worker sends (the telemetry intake's TelemetryKind). */
export type TelemetryKind = 'traces' | 'metrics' | 'logs';

/** One telemetry socket as the sinks see it: what its sender has told about itself so far. */
export interface TelemetrySource {
  /**
   * The worker whose socket this is, once known: named by a log record whose trace the engine sent to
   * that worker alone, or by the sender's own metrics (iii-sdk's worker gauges carry `worker.id`).
   */
  workerId?: string;
}

/** The OTLP/HTTP path of each kind of worker telemetry. */
const PATHS: Record<TelemetryKind, string> = { traces: '/v1/traces', metrics: '/v1/metrics', logs: '/v1/logs' };
/** Bound on telemetry waiting to be sent, per process: past it, frames are dropped (and counted). */
const MAX_QUEUED_BYTES = 8 * 1024 * 1024;
const MAX_IN_FLIGHT = 2;
const EXPORT_TIMEOUT_MS = 10_000;

export interface RelayCounters {
  telemetryExported(kind: TelemetryKind, outcome: 'sent' | 'failed' | 'dropped'): void;
}

/**
 * Sends what iii-sdk workers post on `/otel` (OTLP JSON: traces, metrics, logs) to the collector the
 * `iii-observability` module names, as OTLP/HTTP JSON, unchanged. Bounded: at most 8 MiB queued and
 * two requests in flight; a slow or dead collector makes frames drop (counted), never requests wait.
 */
export class OtlpRelay {
  private readonly queue: { kind: TelemetryKind; body: Buffer }[] = [];
  private queuedBytes = 0;
  private inFlight = 0;
  private closed = false;
  private readonly warnings: WarnThrottle;

  constructor(
    private readonly endpoint: string,
    private readonly kinds: ReadonlySet<TelemetryKind>,
    logger: Logger,
    private readonly counters?: RelayCounters,
  ) {
    this.endpoint = endpoint.replace(/\/+$/, '');
    this.warnings = new WarnThrottle(logger, 30_000);
  }

  accept(kind: TelemetryKind, json: Buffer): boolean {
    if (this.closed || !this.kinds.has(kind)) return false;
    if (this.queuedBytes + json.length > MAX_QUEUED_BYTES) {
      this.counters?.telemetryExported(kind, 'dropped');
      return false;
    }
    // A copy: the frame's buffer belongs to the socket.
    this.queue.push({ kind, body: Buffer.from(json) });
    this.queuedBytes += json.length;
    this.pump();
    return true;
  }

  private pump(): void {
    while (this.inFlight < MAX_IN_FLIGHT && this.queue.length > 0) {
      const item = this.queue.shift() as { kind: TelemetryKind; body: Buffer };
      this.queuedBytes -= item.body.length;
      this.inFlight++;
      void this.send(item.kind, item.body).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async send(kind: TelemetryKind, body: Buffer): Promise<void> {
    try {
      // undici is loaded by the first export: engines without a collector never carry it.
      const { request } = await import('undici');
      const response = await request(`${this.endpoint}${PATHS[kind]}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        headersTimeout: EXPORT_TIMEOUT_MS,
        bodyTimeout: EXPORT_TIMEOUT_MS,
      });
      await response.body.dump();
      const ok = response.statusCode >= 200 && response.statusCode < 300;
      this.counters?.telemetryExported(kind, ok ? 'sent' : 'failed');
      if (!ok) this.warnings.warn('status', { endpoint: this.endpoint, kind, status: response.statusCode }, 'the OTLP collector refused worker telemetry');
    } catch (err) {
      this.counters?.telemetryExported(kind, 'failed');
      this.warnings.warn('error', { endpoint: this.endpoint, kind, err }, 'worker telemetry could not reach the OTLP collector');
    }
  }

  close(): void {
    this.closed = true;
    this.queue.length = 0;
    this.queuedBytes = 0;
  }
}

/** Workers' /otel telemetry goes to the collector when iii-observability exports over OTLP, by signal switch. */
export function workerTelemetryRelay(config: ObservabilityConfig, logger: Logger, counters: RelayCounters): OtlpRelay | undefined {
  const endpoint = otlpEndpoint(config);
  if (endpoint === undefined) return undefined;
  // As iii's switches: traces follow `exporter`, metrics `metrics_exporter`, logs `logs_exporter`.
  const kinds = new Set<TelemetryKind>(['traces']);
  const exported = (value: unknown): boolean => value === 'otlp' || value === 'both';
  if (config.metrics_enabled !== false && exported(config.metrics_exporter)) kinds.add('metrics');
  if (config.logs_enabled !== false && exported(config.logs_exporter)) kinds.add('logs');
  return new OtlpRelay(endpoint, kinds, logger, counters);
}
