import { performance } from 'node:perf_hooks';
import type WebSocket from 'ws';
import type { ReadGate } from './worker-outbound.js';

/**
 * max_frames_per_second for one worker: past the limit within a second, the socket stops being read
 * (TCP pushes back on the worker) and frames already read wait, in order, until the second is over.
 * Nothing is dropped. The clock is read only when the count reaches the limit, not per frame.
 */
export class FrameRateLimit {
  private count = 0;
  private windowStart = performance.now();
  private limited = false;
  private timer: NodeJS.Timeout | undefined;
  /** Frames read while limited, handed back in order when the second is over. */
  private waiting: WebSocket.RawData[] = [];

  constructor(
    private readonly maxPerSecond: number,
    private readonly reads: ReadGate,
    /** Handles a frame the limit let through (also the waiting ones, later). */
    private readonly handle: (frame: WebSocket.RawData) => void,
    /** The limit was hit: reads pause for the rest of the second (metrics, log). */
    private readonly onLimited: () => void,
  ) {}

  /** A frame from the worker: handled now, or kept until the second is over. */
  receive(frame: WebSocket.RawData): void {
    if (this.limited) {
      this.waiting.push(frame);
      return;
    }
    if (++this.count > this.maxPerSecond) {
      const now = performance.now();
      if (now - this.windowStart >= 1000) {
        // The count covers more than a second: a new window starts with this frame.
        this.windowStart = now;
        this.count = 1;
      } else {
        this.limit(now);
        this.waiting.push(frame);
        return;
      }
    }
    this.handle(frame);
  }

  private limit(now: number): void {
    this.limited = true;
    this.onLimited();
    this.reads.pause('frame-rate');
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.limited = false;
      this.windowStart = performance.now();
      this.count = 0;
      const waiting = this.waiting;
      this.waiting = [];
      for (const frame of waiting) this.receive(frame);
      if (!this.limited) this.reads.resume('frame-rate');
    }, Math.max(1, 1000 - (now - this.windowStart)));
    this.timer.unref();
  }

  /** The connection is gone: nothing waits any more. */
  close(): void {
    clearTimeout(this.timer);
    this.waiting = [];
  }
}
