import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import WebSocket from 'ws';
import type { TelemetryKind, TelemetrySource } from '../observability/otlp-relay.js';

/**
 * The `/otel` socket of the worker port (docs/protocol.md#telemetry): iii-sdk sends its traces,
 * metrics and logs there as binary frames, a 4-byte prefix (`OTLP`, `MTRC`, `LOGS`) then OTLP JSON.
 * Each frame is handed to a sink (the observability exporter, when one is configured) or dropped,
 * and counted either way. Memory is bounded whatever the senders do: a process-wide byte budget
 * (a token bucket over the bytes read off every telemetry socket) pauses the sockets that exceed
 * it before `ws` can buffer more, and the heartbeat drops sockets that go silent.
 */
/** The three kinds of OTLP data a worker sends (defined with the relay that exports them). */
export type { TelemetryKind, TelemetrySource };

/** Where decoded frames go: `true` if taken, `false` if its queue is full (counted as dropped). */
export interface TelemetrySink {
  accept(kind: TelemetryKind, json: Buffer, source?: TelemetrySource): boolean;
}

export type TelemetryOutcome = 'accepted' | 'dropped' | 'malformed';

export interface TelemetryCounters {
  telemetryFrame(kind: TelemetryKind | 'unknown', outcome: TelemetryOutcome, bytes: number): void;
  telemetryThrottled(): void;
}

const PREFIXES: ReadonlyMap<string, TelemetryKind> = new Map([
  ['OTLP', 'traces'],
  ['MTRC', 'metrics'],
  ['LOGS', 'logs'],
]);

/** Sustained telemetry a process reads, across every /otel socket; bursts up to BURST_BYTES. */
export const TELEMETRY_BYTES_PER_SECOND = 4 * 1024 * 1024;
const BURST_BYTES = 4 * 1024 * 1024;

/** The kind of a prefixed telemetry frame; only a frame starting O, M or L is looked at further. */
export function telemetryKindOf(bytes: Buffer): TelemetryKind | undefined {
  const first = bytes[0];
  if (first !== 0x4f && first !== 0x4d && first !== 0x4c) return undefined;
  return bytes.length >= 4 ? PREFIXES.get(bytes.toString('latin1', 0, 4)) : undefined;
}

interface TelemetrySocket {
  ws: WebSocket;
  raw: Duplex;
  silentTicks: number;
  paused: boolean;
  source: TelemetrySource;
}

export class TelemetryIntake {
  private readonly sockets = new Set<TelemetrySocket>();
  private readonly byWs = new WeakMap<WebSocket, TelemetrySocket>();
  private tokens = BURST_BYTES;
  private refilledAt = Date.now();
  private resumeTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly counters?: TelemetryCounters,
    private readonly sink?: TelemetrySink,
  ) {}

  get size(): number {
    return this.sockets.size;
  }

  /** Takes an accepted (and authenticated) /otel socket. */
  attach(ws: WebSocket, raw: Duplex): void {
    const entry: TelemetrySocket = { ws, raw, silentTicks: 0, paused: false, source: {} };
    this.sockets.add(entry);
    this.byWs.set(ws, entry);
    // Counted as they arrive, before `ws` assembles them into frames: past the budget the socket is
    // paused, so a flood waits in TCP buffers rather than in this process.
    raw.on('data', (chunk: Buffer) => this.charge(entry, chunk.length));
    ws.on('message', (data: WebSocket.RawData, isBinary: boolean) => {
      entry.silentTicks = 0;
      this.frame(entry.source, data, isBinary);
    });
    ws.on('pong', () => {
      entry.silentTicks = 0;
    });
    ws.on('ping', () => {
      entry.silentTicks = 0;
    });
    ws.on('error', () => undefined);
    ws.on('close', () => this.sockets.delete(entry));
  }

  /** One heartbeat tick for every telemetry socket: ping, or drop a socket silent too long. */
  heartbeat(maxSilentTicks: number): void {
    for (const entry of this.sockets) {
      if (entry.paused) continue; // silent because we stopped reading it
      if (++entry.silentTicks > maxSilentTicks) {
        this.logger.debug('telemetry socket sent nothing, not even a pong: dropped');
        entry.ws.terminate();
        this.sockets.delete(entry);
      } else if (entry.ws.readyState === WebSocket.OPEN) {
        entry.ws.ping();
      }
    }
  }

  /** A frame of `ws` read before it was attached (a telemetry socket that first looked like a worker). */
  receive(ws: WebSocket, data: WebSocket.RawData): void {
    this.frame(this.byWs.get(ws)?.source ?? {}, data, true);
  }

  close(code: number, reason: string): void {
    clearTimeout(this.resumeTimer);
    for (const entry of this.sockets) entry.ws.close(code, reason);
  }

  private frame(source: TelemetrySource, data: WebSocket.RawData, isBinary: boolean): void {
    const bytes = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
    const kind = isBinary ? telemetryKindOf(bytes) : undefined;
    if (kind === undefined) {
      this.counters?.telemetryFrame('unknown', 'malformed', bytes.length);
      return;
    }
    const taken = this.sink?.accept(kind, bytes.subarray(4), source) ?? false;
    this.counters?.telemetryFrame(kind, taken ? 'accepted' : 'dropped', bytes.length);
  }

  private charge(entry: TelemetrySocket, bytes: number): void {
    this.refill();
    this.tokens -= bytes;
    if (this.tokens >= 0) return;
    // Paused again even when already marked: `ws` resumes its socket when its own buffer drains.
    entry.raw.pause();
    if (entry.paused) return;
    entry.paused = true;
    this.counters?.telemetryThrottled();
    this.scheduleResume();
  }

  private refill(): void {
    const now = Date.now();
    this.tokens = Math.min(BURST_BYTES, this.tokens + ((now - this.refilledAt) / 1000) * TELEMETRY_BYTES_PER_SECOND);
    this.refilledAt = now;
  }

  /** Resumes paused sockets once the budget is positive again. */
  private scheduleResume(): void {
    if (this.resumeTimer !== undefined) return;
    const waitMs = Math.max(10, Math.ceil((-this.tokens / TELEMETRY_BYTES_PER_SECOND) * 1000));
    this.resumeTimer = setTimeout(() => {
      this.resumeTimer = undefined;
      this.refill();
      if (this.tokens < 0) {
        this.scheduleResume();
        return;
      }
      for (const entry of this.sockets) {
        if (!entry.paused) continue;
        entry.paused = false;
        entry.raw.resume();
      }
    }, waitMs);
    this.resumeTimer.unref();
  }
}
