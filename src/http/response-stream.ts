import type { ServerResponse } from 'node:http';
import type { ChannelEndStatus, ChannelReader, ReaderFeedback } from '../channels/channel.js';
import { addResponseHeader } from './response.js';
import type { StreamHeapGrowth, StreamTrack } from './stream-heap.js';

/**
 * The engine's reading end of a handler's `response` channel (docs/streaming.md#responses): text items
 * are control messages (`set_status`, `set_headers`), binary items are the body. The first binary item
 * starts the HTTP response (status and headers as set so far, chunked); each later one is written
 * as it arrives, with the HTTP client's back-pressure passed back to the worker's socket. Text after
 * the first chunk is ignored, as iii does.
 */
export type StreamStart =
  /** The body started: the response is on the wire and ends with the channel. */
  | { kind: 'streaming' }
  /** The worker closed the channel without a body: an empty response with what it set. */
  | { kind: 'empty'; status: number; headers: [string, string][] }
  /** The worker's socket died before any body (its handler's outcome tells the rest). */
  | { kind: 'aborted'; reason: string };

/** How a started stream ended: `complete`, or cut (the client sees a truncated response). */
export type StreamEnd = { status: number; complete: boolean; reason: string };

export class ResponseStream implements ChannelReader {
  status = 200;
  readonly headers: [string, string][] = [];
  private state: 'waiting' | 'streaming' | 'ended' = 'waiting';
  private feedback: ReaderFeedback | undefined;
  private resolveStart: ((start: StreamStart) => void) | undefined;
  private resolveEnd: ((end: StreamEnd) => void) | undefined;
  /** How it ended, once it has; `ended` is made on first use (most responses never stream). */
  private endedWith: StreamEnd | undefined;
  private endedPromise: Promise<StreamEnd> | undefined;
  readonly started: Promise<StreamStart>;
  /** The body's bytes, as the heap growing factor counts them (stream-heap.ts); made when it starts. */
  private track: StreamTrack | undefined;

  constructor(
    private readonly res: ServerResponse,
    /** Headers the engine adds to every response (request id, CORS, served-by). */
    private readonly engineHeaders: Record<string, string>,
    private readonly headOnly: boolean,
    /** Raises the process's heap growing factor while a large response streams (stream-heap.ts). */
    private readonly heap?: StreamHeapGrowth,
  ) {
    this.started = new Promise((resolve) => {
      this.resolveStart = resolve;
    });
  }

  /** Settles when a started stream is over (complete or cut). */
  get ended(): Promise<StreamEnd> {
    this.endedPromise ??=
      this.endedWith !== undefined
        ? Promise.resolve(this.endedWith)
        : new Promise((resolve) => {
            this.resolveEnd = resolve;
          });
    return this.endedPromise;
  }

  bind(feedback: ReaderFeedback): void {
    this.feedback = feedback;
  }

  get isStreaming(): boolean {
    return this.state === 'streaming';
  }

  write(data: Buffer, binary: boolean, flushed: () => void): boolean {
    if (this.state === 'waiting') {
      if (!binary) {
        this.control(data.toString('utf8'));
        flushed();
        return true;
      }
      this.begin();
    } else if (this.state !== 'streaming' || !binary) {
      flushed();
      return true;
    }
    if (this.headOnly || this.res.destroyed) {
      flushed();
      return true;
    }
    this.track?.moved(data.length);
    if (this.res.write(data, () => flushed())) return true;
    this.res.once('drain', () => this.feedback?.drained());
    return false;
  }

  end(status: ChannelEndStatus, reason: string): void {
    if (this.state === 'waiting') {
      this.state = 'ended';
      this.resolveStart?.(status === 'complete' ? { kind: 'empty', status: this.status, headers: this.headers } : { kind: 'aborted', reason });
      return;
    }
    if (this.state === 'streaming') this.finish(status === 'complete', reason);
  }

  /** Ends a started stream from the engine's side (the handler failed, shutdown): truncated. */
  cut(reason: string): void {
    if (this.state !== 'streaming') return;
    this.feedback?.gone(reason);
    this.finish(false, reason);
  }

  private begin(): void {
    this.state = 'streaming';
    this.track = this.heap?.track();
    const res = this.res;
    // A client that goes away mid-stream gives up the channel: the worker's writer is told to stop.
    // Listened for from here only: most responses never stream, and a close before does nothing.
    res.once('close', () => {
      if (this.state === 'streaming') this.finish(false, 'the HTTP client went away');
    });
    for (const [name, value] of Object.entries(this.engineHeaders)) res.setHeader(name, value);
    const grouped = new Map<string, string[]>();
    for (const [name, value] of this.headers) grouped.set(name, [...(grouped.get(name) ?? []), value]);
    for (const [name, values] of grouped) if (!(name in this.engineHeaders)) res.setHeader(name, values.length === 1 ? (values[0] as string) : values);
    // The request's body is still arriving (a streamed upload the handler answers before reading it
    // all): whatever is left of it makes the connection unusable for another request.
    if (!res.req.complete) res.setHeader('connection', 'close');
    res.writeHead(this.status);
    this.resolveStart?.({ kind: 'streaming' });
  }

  private finish(complete: boolean, reason: string): void {
    if (this.state === 'ended') return;
    this.state = 'ended';
    this.track?.end();
    if (complete) this.res.end();
    else this.res.destroy();
    if (!complete) this.feedback?.gone(reason);
    this.endedWith = { status: this.status, complete, reason };
    this.resolveEnd?.(this.endedWith);
  }

  /** `set_status` (200-599) and `set_headers` (a string map; invalid names or values are skipped). */
  private control(text: string): void {
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    if (typeof message !== 'object' || message === null) return;
    const { type, status_code: statusCode, headers } = message as { type?: unknown; status_code?: unknown; headers?: unknown };
    if (type === 'set_status' && typeof statusCode === 'number' && Number.isInteger(statusCode) && statusCode >= 200 && statusCode <= 599) {
      this.status = statusCode;
    } else if (type === 'set_headers' && typeof headers === 'object' && headers !== null && !Array.isArray(headers)) {
      for (const [name, value] of Object.entries(headers)) {
        if (typeof value !== 'string') continue;
        const added: [string, string][] = [];
        if (addResponseHeader(added, name, value) !== undefined || added.length === 0) continue;
        const [lower] = added[0] as [string, string];
        // A later set_headers replaces a header of the same name, as a map would.
        for (let i = this.headers.length - 1; i >= 0; i--) if (this.headers[i]?.[0] === lower) this.headers.splice(i, 1);
        this.headers.push(...added);
      }
    }
  }
}
