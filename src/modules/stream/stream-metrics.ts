import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import type { DropReason } from './stream-client.js';

export interface StreamMetricSources {
  clients(): number;
  subscriptions(): number;
}

/**
 * The stream module's metrics (docs/stream.md#metrics), in the engine's registry, so /metrics on the
 * admin listener sums them over every process.
 */
export class StreamMetrics {
  private readonly calls: Counter<'function' | 'outcome'>;
  private readonly drops: Counter<'reason'>;
  private readonly clientMessages: Counter<'kind'>;
  private readonly delivered: Counter;
  private readonly triggerDrops: Counter;

  constructor(registry: Registry, sources: StreamMetricSources) {
    const registers = [registry];
    new Gauge({ name: 'switchyard_stream_clients', help: 'Stream client sockets connected', registers, collect() { this.set(sources.clients()); } });
    new Gauge({ name: 'switchyard_stream_subscriptions', help: 'Stream subscriptions held by connected clients', registers, collect() { this.set(sources.subscriptions()); } });
    this.calls = new Counter({ name: 'switchyard_stream_calls_total', help: 'stream::* function calls answered, by function and outcome', labelNames: ['function', 'outcome'], registers });
    this.drops = new Counter({
      name: 'switchyard_stream_client_drops_total',
      help: 'Stream clients dropped or refused: slow (send buffer over max_buffered_bytes), subscriptions, pending (messages), connections',
      labelNames: ['reason'],
      registers,
    });
    this.clientMessages = new Counter({ name: 'switchyard_stream_client_messages_total', help: 'Messages from stream clients, by kind (join, leave, invalid)', labelNames: ['kind'], registers });
    this.delivered = new Counter({ name: 'switchyard_stream_frames_delivered_total', help: 'Change messages sent to stream clients', registers });
    this.triggerDrops = new Counter({ name: 'switchyard_stream_trigger_drops_total', help: 'Stream changes whose trigger calls were dropped (too many still running)', registers });
  }

  call(functionId: string, ok: boolean): void {
    this.calls.inc({ function: functionId, outcome: ok ? 'ok' : 'error' });
  }

  dropped(reason: DropReason): void {
    this.drops.inc({ reason });
  }

  clientMessage(kind: 'join' | 'leave' | 'invalid'): void {
    this.clientMessages.inc({ kind });
  }

  framesDelivered(frames: number): void {
    if (frames > 0) this.delivered.inc(frames);
  }

  triggerDropped(): void {
    this.triggerDrops.inc();
  }
}
