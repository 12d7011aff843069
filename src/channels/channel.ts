/**
 * A streaming channel (docs/streaming.md): a one-way pipe of text and binary items from one writer to
 * one reader, each of which is a worker's channel WebSocket, a tunnel from another process, or the
 * engine itself (a request body it feeds, a response it streams to an HTTP client). The channel holds
 * a bounded queue while the reader is absent or slow; past it the writer is paused, so a fast writer
 * and a slow reader never grow memory. No I/O here: the ends are adapters (ws-ends.ts, tunnels).
 */

import type { ChannelBudget } from './channel-budget.js';
import { UNBOUNDED_BUDGET } from './channel-budget.js';

/** How a writer finished: `complete` (it closed normally) or `aborted` (it died, or was cut off). */
export type ChannelEndStatus = 'complete' | 'aborted';

/** The reading end, as the channel drives it. */
export interface ChannelReader {
  /**
   * One item; returning false asks for no more until the reader calls `drained()` on its feedback.
   * `flushed`, when the reader calls it, says the item has left this process (written to the kernel):
   * until then it counts against the process's channel budget (channel-budget.ts).
   */
  write(data: Buffer, binary: boolean, flushed: () => void): boolean;
  /** The writer finished; nothing follows. */
  end(status: ChannelEndStatus, reason: string): void;
}

/** What a reader tells the channel. */
export interface ReaderFeedback {
  /** The reader can take more after a `write` returned false. */
  drained(): void;
  /** The reader went away before the end (the writer is told to stop). */
  gone(reason: string): void;
}

/** The writing end, as the channel controls it. */
export interface WriterControl {
  pause(): void;
  resume(): void;
  /** The reader went away or the channel was torn down: stop writing. */
  abort(reason: string): void;
}

/** What a writer hands the channel. */
export interface WriterInput {
  push(data: Buffer, binary: boolean): void;
  end(status: ChannelEndStatus, reason: string): void;
}

/** Either end of a channel can be claimed once. */
export type ChannelDirection = 'read' | 'write';

/** The queue bounds: items (iii's buffer size) and bytes, whichever is reached first. */
export interface ChannelLimits {
  maxQueuedItems: number;
  maxQueuedBytes: number;
}

interface QueuedItem {
  data: Buffer;
  binary: boolean;
}

type WriterState = { kind: 'unclaimed' } | { kind: 'open'; control: WriterControl } | { kind: 'ended'; status: ChannelEndStatus; reason: string };
type ReaderState = { kind: 'unclaimed' } | { kind: 'open'; reader: ChannelReader } | { kind: 'done' };

export class Channel {
  private writer: WriterState = { kind: 'unclaimed' };
  private reader: ReaderState = { kind: 'unclaimed' };
  private queue: QueuedItem[] = [];
  private queuedBytes = 0;
  /** The reader asked for a pause (its write returned false). */
  private readerBusy = false;
  private writerPaused = false;
  private settled = false;
  /** Bytes the writer pushed, for limits and logs. */
  bytesIn = 0;
  /** Bytes this channel holds against the budget: queued, or handed to the reader and not flushed. */
  private held = 0;
  /** Of those, handed to the reader and not flushed yet. */
  private inFlight = 0;
  /** Inside a reader's write (a reader may say `flushed` before it returns). */
  private handing = false;

  constructor(
    readonly id: string,
    readonly key: string,
    private readonly limits: ChannelLimits,
    /** Called once, when both ends are done (or the channel is torn down). */
    private readonly onSettled: (channel: Channel) => void,
    /** Optional bound on the bytes the writer may push (a streamed request body's limit). */
    private readonly maxBytesIn = Number.POSITIVE_INFINITY,
    /** The process's bound on what all its channels hold together. */
    private readonly budget: ChannelBudget = UNBOUNDED_BUDGET,
    /**
     * Its binary items are pieces of one byte stream whose boundaries mean nothing (an HTTP request
     * body: where it splits depends on the client's chunks and the engine's socket reads), so a reader
     * may join items that reach it together (ws-end.ts). Otherwise each item stays one frame.
     */
    readonly byteStream = false,
  ) {}

  /** Whether an end was claimed yet (unclaimed channels expire). */
  isClaimed(direction: ChannelDirection): boolean {
    return direction === 'write' ? this.writer.kind !== 'unclaimed' : this.reader.kind !== 'unclaimed';
  }

  get isSettled(): boolean {
    return this.settled;
  }

  /** Claims the writing end; undefined when it was claimed before (a reused key) or the channel is gone. */
  attachWriter(control: WriterControl): WriterInput | undefined {
    if (this.settled || this.writer.kind !== 'unclaimed') return undefined;
    this.writer = { kind: 'open', control };
    if (this.reader.kind === 'done') {
      control.abort('the reader is gone');
      this.writerFinished({ kind: 'ended', status: 'aborted', reason: 'the reader is gone' });
    }
    return {
      push: (data, binary) => this.push(data, binary),
      end: (status, reason) => this.writerFinished({ kind: 'ended', status, reason }),
    };
  }

  /** Claims the reading end; undefined when it was claimed before or the channel is gone. */
  attachReader(reader: ChannelReader): ReaderFeedback | undefined {
    if (this.settled || this.reader.kind !== 'unclaimed') return undefined;
    this.reader = { kind: 'open', reader };
    // Deferred: the reader's adapter finishes wiring itself before the first item reaches it.
    queueMicrotask(() => this.flush());
    return {
      drained: () => {
        this.readerBusy = false;
        this.flush();
      },
      gone: (reason) => this.readerGone(reason),
    };
  }

  /** Tears the channel down from outside (its request ended, shutdown, expiry). */
  destroy(reason: string): void {
    if (this.settled) return;
    if (this.writer.kind === 'open') this.writer.control.abort(reason);
    if (this.reader.kind === 'open') this.reader.reader.end('aborted', reason);
    this.writer = { kind: 'ended', status: 'aborted', reason };
    this.reader = { kind: 'done' };
    this.queue = [];
    this.queuedBytes = 0;
    this.settle();
  }

  private push(data: Buffer, binary: boolean): void {
    if (this.writer.kind !== 'open') return;
    this.bytesIn += data.length;
    if (this.bytesIn > this.maxBytesIn) {
      const reason = `more than ${this.maxBytesIn} bytes`;
      this.writer.control.abort(reason);
      this.writerFinished({ kind: 'ended', status: 'aborted', reason });
      return;
    }
    if (this.reader.kind === 'done') return;
    if (this.reader.kind === 'open' && !this.readerBlocked && this.queue.length === 0) {
      this.handOver(this.reader.reader, data, binary);
    } else if (data.length > this.limits.maxQueuedBytes) {
      // One item larger than the whole buffer is refused, never queued whole (docs/streaming.md#limits).
      const reason = `an item of ${data.length} bytes is larger than the channel's buffer (${this.limits.maxQueuedBytes} bytes)`;
      this.writer.control.abort(reason);
      this.writerFinished({ kind: 'ended', status: 'aborted', reason });
      return;
    } else {
      this.queue.push({ data, binary });
      this.queuedBytes += data.length;
      this.held += data.length;
      this.budget.take(data.length);
    }
    this.applyBackPressure();
  }

  /**
   * The reader is not to be given more: it said so, or the process's budget is spent and this
   * channel's last item has not left the process yet (then one item at a time, at the reader's pace).
   */
  private get readerBlocked(): boolean {
    return this.readerBusy || (this.inFlight > 0 && this.budget.full);
  }

  /** Gives the reader one item, counted against the budget until the reader says it was flushed. */
  private handOver(reader: ChannelReader, data: Buffer, binary: boolean): void {
    const bytes = data.length;
    if (!this.settled) {
      this.held += bytes;
      this.inFlight += bytes;
      this.budget.take(bytes);
    }
    let once = false;
    const flushed = (): void => {
      if (once || this.settled) return;
      once = true;
      this.held -= bytes;
      this.inFlight -= bytes;
      this.budget.give(bytes);
      if (this.handing) return;
      // The budget may have held this channel back: it may go on now.
      if (this.queue.length > 0 && !this.readerBusy) this.flush();
      else this.applyBackPressure();
    };
    this.handing = true;
    try {
      if (!reader.write(data, binary, flushed)) this.readerBusy = true;
    } finally {
      this.handing = false;
    }
  }

  private writerFinished(state: Extract<WriterState, { kind: 'ended' }>): void {
    if (this.writer.kind === 'ended') return;
    this.writer = state;
    this.flush();
  }

  private readerGone(reason: string): void {
    if (this.reader.kind === 'done') return;
    this.reader = { kind: 'done' };
    this.queue = [];
    this.queuedBytes = 0;
    if (this.writer.kind === 'open') {
      this.writer.control.abort(reason);
      this.writer = { kind: 'ended', status: 'aborted', reason };
    }
    this.settle();
  }

  /** Hands queued items to a ready reader, then the end once the writer finished and the queue is empty. */
  private flush(): void {
    if (this.reader.kind !== 'open') return;
    const reader = this.reader.reader;
    while (this.queue.length > 0 && !this.readerBlocked) {
      const item = this.queue.shift() as QueuedItem;
      this.queuedBytes -= item.data.length;
      // Queued bytes become bytes in flight: still held, counted once.
      this.held -= item.data.length;
      this.budget.give(item.data.length);
      this.handOver(reader, item.data, item.binary);
    }
    if (this.queue.length === 0 && this.writer.kind === 'ended') {
      this.reader = { kind: 'done' };
      reader.end(this.writer.status, this.writer.reason);
      this.settle();
      return;
    }
    this.applyBackPressure();
  }

  /** Pauses the writer while the queue is over its bounds or the reader is busy; resumes it after. */
  private applyBackPressure(): void {
    if (this.writer.kind !== 'open') return;
    const full = this.queue.length >= this.limits.maxQueuedItems || this.queuedBytes >= this.limits.maxQueuedBytes;
    // Past the process's budget a channel queues nothing beyond the item in hand.
    const shouldPause = full || (this.queue.length > 0 && (this.readerBusy || this.budget.full));
    if (shouldPause && !this.writerPaused) {
      this.writerPaused = true;
      this.writer.control.pause();
    } else if (!shouldPause && this.writerPaused) {
      this.writerPaused = false;
      this.writer.control.resume();
    }
  }

  private settle(): void {
    if (this.settled) return;
    this.settled = true;
    // Whatever is still queued or in flight is the reader's socket's now, or dropped.
    this.budget.give(this.held);
    this.held = 0;
    this.inFlight = 0;
    this.onSettled(this);
  }
}
