import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type WebSocket from 'ws';
import type { TelemetryIntake } from './telemetry-intake.js';
import { telemetryKindOf } from './telemetry-intake.js';

/**
 * iii-sdk 0.9 sends its telemetry on a socket of its own to `/`, not `/otel` (docs/protocol.md#telemetry):
 * a connection on the worker path whose first frame is a binary telemetry frame (`OTLP`, `MTRC` or
 * `LOGS` prefix) while it holds nothing is not a worker. It leaves the hub quietly (never counted as
 * a worker, nothing logged as malformed) and its socket is served as an `/otel` socket is.
 */

/**
 * Whether a worker-socket frame is a telemetry frame. A JSON frame starts with `{` (or whitespace),
 * so only a frame starting O, M or L is looked at further.
 */
export function isTelemetryFrame(raw: Buffer): boolean {
  return telemetryKindOf(raw) !== undefined;
}

/** What the hand-off needs of the connection that turned out to be a telemetry socket. */
export interface TelemetryCandidate {
  readonly id: string;
  readonly remoteAddress: string;
  /** Leaves the hub and stops reading; returns the WebSocket for the intake. */
  handOver(): WebSocket;
}

/** Hands the connection's socket (and the frame that showed what it is) to the telemetry intake. */
export function handOverTelemetrySocket(
  connection: TelemetryCandidate,
  raw: Duplex | undefined,
  frame: Buffer,
  intake: TelemetryIntake,
  logger: Logger,
): void {
  const ws = connection.handOver();
  logger.debug({ workerId: connection.id, remoteAddress: connection.remoteAddress }, 'connection on / is a telemetry socket (iii-sdk 0.9): served as /otel');
  if (raw === undefined) {
    ws.terminate();
    return;
  }
  intake.attach(ws, raw);
  intake.receive(ws, frame);
}
