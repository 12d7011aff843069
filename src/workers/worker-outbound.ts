import type { Logger } from 'pino';
import type WebSocket from 'ws';
import type { QueueBudget, QueueHolder } from './queue-budget.js';

/**
 * Back-pressure: when a worker does not read its socket, what the engine sends it piles up in memory.
 * Past either mark — this many bytes queued, or this many frames sent while more than the low mark
 * was queued (many tiny frames, e.g. the pongs of a ping flood, cost far more memory than their
 * bytes) — the engine stops reading from that worker (its own frames wait in TCP) until the queue is
 * below the low mark again. Large bodies to a worker that does read stay below both marks.
 */
const OUTBOUND_HIGH_WATER_BYTES = 16 * 1024 * 1024;
const OUTBOUND_LOW_WATER_BYTES = 512 * 1024;
const MAX_SENDS_WHILE_BACKLOGGED = 20_000;
const BACKPRESSURE_POLL_MS = 10;
/** ws sends a Buffer as a binary frame unless told otherwise; the engine's frames are always text. */
const TEXT_FRAME = { binary: false } as const;

/**
 * Reading from one worker's socket can be stopped for several reasons at once (it does not read what it
 * is sent; it sends too many frames): reads resume only when no reason is left.
 */
export class ReadGate {
  private readonly reasons = new Set<string>();
  constructor(private readonly socket: Pick<WebSocket, 'pause' | 'resume'>) {}

  pause(reason: string): void {
    if (this.reasons.size === 0) this.socket.pause();
    this.reasons.add(reason);
  }

  resume(reason: string): void {
    if (!this.reasons.delete(reason) || this.reasons.size > 0) return;
    this.socket.resume();
  }
}

/** The socket under a WebSocket, as far as batching needs it. */
export interface CorkableTransport {
  cork(): void;
  uncork(): void;
}

/**
 * What the engine sends one worker, and the flow control around it: frames of one event-loop turn
 * share one write (the transport is corked until the check phase), and reads from a worker that does
 * not read what it is sent are paused until it catches up (the marks above).
 */
export class WorkerOutbound implements QueueHolder {
  /** Reads paused because the worker does not read what we send. */
  private readsPaused = false;
  /** Frames sent since the queue towards the worker was last below the low mark. */
  private sendsWhileBacklogged = 0;
  private corked = false;

  constructor(
    private readonly socket: WebSocket,
    private readonly logger: Logger,
    /** Stops the catch-up poll once the connection is gone. */
    private readonly isClosed: () => boolean,
    /** When the caller has it, sends are batched on it. */
    private readonly transport?: CorkableTransport,
    /**
     * max_queued_bytes: past it the worker is closed (`onOverflow`), once; so it is when the
     * queues of its listener's workers in this process together pass max_listener_queued_bytes
     * and its queue is the largest.
     */
    private readonly overflow?: { maxQueuedBytes: number; onOverflow: (queued: number, listenerTotal?: number) => void; budget?: QueueBudget },
    /** Shared with the frame-rate limit, so neither resumes reads the other paused. */
    private readonly reads: ReadGate = new ReadGate(socket),
  ) {}

  private overflowed = false;

  queuedBytes(): number {
    return this.socket.bufferedAmount;
  }

  evict(queued: number, total: number): void {
    if (this.overflowed) return;
    this.overflowed = true;
    this.overflow?.onOverflow(queued, total);
  }

  /** The worker is gone: its queue leaves its listener's count. */
  release(): void {
    this.overflow?.budget?.release(this);
  }

  /**
   * Sends one frame; the caller checked the socket is open. A frame given as bytes (UTF-8 JSON) goes
   * out as a text frame too, the same bytes on the wire, and ws neither counts nor copies them (a
   * string is measured with Buffer.byteLength, which flattens a spliced text, and then encoded).
   */
  send(frame: string | Buffer): void {
    if (!this.corked && this.transport !== undefined) {
      // Under load many requests invoke on one worker in the same turn of the event loop; one write
      // per frame made the write syscalls the engine's largest cost (docs/performance.md).
      this.corked = true;
      this.transport.cork();
      setImmediate(this.uncork);
    }
    if (typeof frame === 'string') this.socket.send(frame);
    else this.socket.send(frame, TEXT_FRAME);
    const queued = this.socket.bufferedAmount;
    if (this.overflow !== undefined && queued > this.overflow.maxQueuedBytes && !this.overflowed) {
      this.overflowed = true;
      this.overflow.budget?.release(this);
      this.overflow.onOverflow(queued);
      return;
    }
    this.overflow?.budget?.report(this, queued);
    if (this.overflowed) return;
    if (queued < OUTBOUND_LOW_WATER_BYTES) {
      this.sendsWhileBacklogged = 0;
    } else if ((++this.sendsWhileBacklogged > MAX_SENDS_WHILE_BACKLOGGED || queued > OUTBOUND_HIGH_WATER_BYTES) && !this.readsPaused) {
      this.pauseReads();
    }
  }

  private readonly uncork = (): void => {
    this.corked = false;
    this.transport?.uncork();
  };

  private pauseReads(): void {
    this.readsPaused = true;
    this.reads.pause('backlog');
    this.logger.warn({ bufferedBytes: this.socket.bufferedAmount }, 'worker is not reading its socket: pausing reads from it until it catches up');
    const poll = (): void => {
      if (this.isClosed()) return;
      if (this.socket.bufferedAmount > OUTBOUND_LOW_WATER_BYTES) {
        setTimeout(poll, BACKPRESSURE_POLL_MS).unref();
        return;
      }
      this.readsPaused = false;
      this.sendsWhileBacklogged = 0;
      this.reads.resume('backlog');
      this.logger.info('worker caught up: reading from it again');
    };
    setTimeout(poll, BACKPRESSURE_POLL_MS).unref();
  }
}
