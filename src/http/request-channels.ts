import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Channel } from '../channels/channel.js';
import type { ChannelMaker, ChannelRegistry, Reservation } from '../channels/channel-registry.js';
import type { InvocationOutcome } from '../invocation/invoker.js';
import type { StreamEnd, StreamStart } from './response-stream.js';
import { ResponseStream } from './response-stream.js';
import { randomUuid } from '../random-ids.js';
import type { StreamHeapGrowth, StreamTrack } from './stream-heap.js';

/**
 * The two channels iii gives every HTTP handler (docs/streaming.md): `request_body`, which the engine
 * writes (the body it buffered, or the live upload) and the worker reads, and `response`, which the
 * worker writes and the engine turns into the HTTP response. Kept out of the pipeline: it asks for
 * the refs, hands over the handler's outcome, and gets back what to answer.
 */

/** What the body of this request is, for the channel (http/body.ts decides). */
export type RequestBodySource = { kind: 'buffered'; bytes: Buffer } | { kind: 'streamed'; req: IncomingMessage };

/** What the pipeline does after the handler (or its stream) answered. */
export type HandlerAnswer =
  /** The handler's outcome decides, as without streaming (a buffered ApiResponse, or a failure). */
  | { kind: 'outcome'; outcome: InvocationOutcome }
  /** The worker closed its response channel without a body: an empty response with what it set. */
  | { kind: 'empty'; status: number; headers: [string, string][] }
  /** The response is being streamed; `ended` settles when it is over. */
  | { kind: 'streaming'; ended: Promise<StreamEnd> };

/**
 * After a handler returned nothing, how long the engine waits for its response channel to open
 * (bounded by the request deadline): iii-sdk's writer connects when first used, so a stream started
 * just before the handler returned may connect just after its result arrives.
 */
export const RESPONSE_ATTACH_GRACE_MS = 2000;

/** The writer control of a body already in memory: nothing to pause, resume or abort. */
const BUFFERED_BODY = Object.freeze({ pause: () => undefined, resume: () => undefined, abort: () => undefined });

/**
 * Both channels are reserved, not made (channel-registry.ts): most handlers never open them, and iii's
 * wire needs only their ids and key. A worker's claim of either makes it then, wired as if it had
 * existed from the start (the buffered body queued on `request_body`, the engine reading `response`).
 * A streamed upload's `request_body` is made at once: the upload is read into it as it arrives.
 */
export class RequestChannels implements ChannelMaker {
  private readonly key: string;
  /** The two ids, reserved together (one registry entry). */
  private readonly reservation: Reservation;
  private readonly requestBodyId: string;
  private readonly responseId: string;
  private requestBody: Channel | undefined;
  private response: Channel | undefined;
  private stream: ResponseStream | undefined;
  /** Who waits for the response stream to start while the response channel is not made yet. */
  private onStreamMade: ((stream: ResponseStream) => void) | undefined;
  /** Settles what `answer` returned; set while the handler's outcome and its stream race. */
  private settleAnswer: ((answer: HandlerAnswer | Promise<HandlerAnswer>) => void) | undefined;
  private outcome: Promise<InvocationOutcome> | undefined;
  private deadline = 0;
  /** Buffered body bytes counted against the channel budget while `request_body` is only reserved. */
  private reservedBytes = 0;
  private closed = false;
  /** The whole body reached the channel (the connection can be reused). */
  private bodyConsumed = false;
  /** This request's streamed upload, as the heap growing factor counts it (stream-heap.ts). */
  private uploadTrack: StreamTrack | undefined;

  constructor(
    private readonly registry: ChannelRegistry,
    private readonly source: RequestBodySource | undefined,
    private readonly res: ServerResponse,
    private readonly engineHeaders: Record<string, string>,
    private readonly headOnly: boolean,
    /** The stream_body_limit; 0 is none. */
    private readonly maxStreamedBytes: number,
    /** Raises the process's heap growing factor while a large upload or response streams (stream-heap.ts). */
    private readonly streamHeap?: StreamHeapGrowth,
  ) {
    // One key for both: whoever holds one ref of this request holds the other.
    this.key = randomUuid();
    this.reservation = registry.reservePair(this.key, this);
    this.requestBodyId = this.reservation.first;
    this.responseId = this.reservation.second;
    if (source?.kind === 'streamed') {
      registry.materialise(this.requestBodyId);
    } else {
      // A buffered body is whole already; it counts against the budget as if it sat in its channel.
      this.bodyConsumed = true;
      const bytes = source?.bytes.length ?? 0;
      if (bytes > 0) {
        this.reservedBytes = bytes;
        registry.budget.take(bytes);
      }
    }
  }

  /** The refs spliced into the handler's ApiRequest, as iii names them (ids and keys need no escaping). */
  refsJson(): string {
    const { requestBodyId, responseId, key } = this;
    return (
      `"request_body":{"channel_id":"${requestBodyId}","access_key":"${key}","direction":"read"},` +
      `"response":{"channel_id":"${responseId}","access_key":"${key}","direction":"write"}`
    );
  }

  /** The two channels' ids (the call carries them: docs/reliability.md). */
  get ids(): readonly string[] {
    return [this.requestBodyId, this.responseId];
  }

  /** Whether the connection may carry another request (no upload was left unread). */
  get bodyFullyRead(): boolean {
    return this.bodyConsumed;
  }

  /**
   * Races the handler's outcome against its response channel (docs/streaming.md#which-wins): a body
   * on the channel wins; a non-empty result wins; a result of nothing waits for the channel.
   *
   * One promise, settled by whichever comes first, and the rest decided in the callbacks: it runs for
   * every HTTP request, and an async race (a promise per contender, an object per result, an await
   * per step) showed in the engine's allocation profile (docs/performance.md, issue 26).
   */
  answer(outcome: Promise<InvocationOutcome>, deadline: number): Promise<HandlerAnswer> {
    this.outcome = outcome;
    this.deadline = deadline;
    const answered = new Promise<HandlerAnswer>((resolve) => {
      this.settleAnswer = resolve;
    });
    void outcome.then(this.outcomeArrived);
    if (this.stream !== undefined) this.raceStream(this.stream);
    return answered;
  }

  /** The handler's outcome, if it comes before a stream starts. */
  private readonly outcomeArrived = (result: InvocationOutcome): void => {
    const settle = this.settleAnswer;
    if (settle === undefined) return;
    this.settleAnswer = undefined;
    if (!result.ok || (result.value !== undefined && result.value !== null)) {
      this.close('handler answered');
      settle({ kind: 'outcome', outcome: result });
      return;
    }
    settle(this.afterNothing(result));
  };

  /** A made response channel's stream joins the race while it is open. */
  private raceStream(stream: ResponseStream): void {
    void stream.started.then((start) => {
      const settle = this.settleAnswer;
      if (settle === undefined) return;
      this.settleAnswer = undefined;
      const outcome = this.outcome as Promise<InvocationOutcome>;
      if (start.kind === 'streaming') {
        settle(this.streaming(outcome));
        return;
      }
      if (start.kind === 'empty') {
        this.close('response sent');
        settle({ kind: 'empty', status: start.status, headers: start.headers });
        return;
      }
      // The worker's socket died before any body: its handler's outcome says what happened. The
      // request is over for its channels too (the request_body channel would otherwise stay held).
      this.close('response channel lost');
      settle(outcome.then((value) => ({ kind: 'outcome', outcome: value })));
    });
  }

  /** The handler returned nothing: the answer is on the response channel, if the worker opened it. */
  private async afterNothing(result: InvocationOutcome): Promise<HandlerAnswer> {
    const claimed = this.response !== undefined && this.response.isClaimed('write');
    const waitMs = Math.min(this.deadline - performance.now(), claimed ? Number.POSITIVE_INFINITY : RESPONSE_ATTACH_GRACE_MS);
    const start = await within(this.streamStarted(), waitMs);
    this.onStreamMade = undefined;
    if (start !== undefined && start.kind === 'streaming') return this.streaming(this.outcome as Promise<InvocationOutcome>);
    if (start !== undefined && start.kind === 'empty') {
      this.close('response sent');
      return { kind: 'empty', status: start.status, headers: start.headers };
    }
    this.close('handler answered nothing');
    return { kind: 'outcome', outcome: result };
  }

  /** Destroys both channels (the request is over); a worker that opens them later is refused. */
  close(reason: string): void {
    if (!this.closed) {
      this.closed = true;
      this.registry.release(this.reservation, this.requestBodyId);
      this.registry.release(this.reservation, this.responseId);
      this.giveReservedBytes();
    }
    this.uploadTrack?.end();
    this.requestBody?.destroy(reason);
    if (this.stream === undefined || !this.stream.isStreaming) this.response?.destroy(reason);
  }

  /** When the response stream starts; made when the response channel is (a worker claimed it). */
  private streamStarted(): Promise<StreamStart> {
    if (this.stream !== undefined) return this.stream.started;
    return new Promise((resolve) => {
      this.onStreamMade = (stream) => void stream.started.then(resolve);
    });
  }

  /** The registry's call when a worker (or a streamed upload) first needs one of the two channels. */
  makeChannel(id: string): Channel {
    return id === this.requestBodyId ? this.makeRequestBody(id) : this.makeResponse(id);
  }

  private makeResponse(id: string): Channel {
    const response = this.registry.create({}, this.key, id);
    const stream = new ResponseStream(this.res, this.engineHeaders, this.headOnly, this.streamHeap);
    const feedback = response.attachReader(stream);
    if (feedback !== undefined) stream.bind(feedback);
    this.response = response;
    this.stream = stream;
    if (this.settleAnswer !== undefined) this.raceStream(stream);
    this.onStreamMade?.(stream);
    return response;
  }

  private makeRequestBody(id: string): Channel {
    const { maxStreamedBytes } = this;
    const channel = this.registry.create(maxStreamedBytes > 0 ? { maxBytesIn: maxStreamedBytes, byteStream: true } : { byteStream: true }, this.key, id);
    this.requestBody = channel;
    // The channel counts the body from here on.
    this.giveReservedBytes();
    this.feedBody(channel, this.source);
    return channel;
  }

  private giveReservedBytes(): void {
    if (this.reservedBytes === 0) return;
    this.registry.budget.give(this.reservedBytes);
    this.reservedBytes = 0;
  }

  private streaming(outcome: Promise<InvocationOutcome>): HandlerAnswer {
    const stream = this.stream as ResponseStream;
    // The handler may go on after the body started (SSE); a failure of it cuts the stream, since its
    // writer would otherwise never close. A timeout does not: a stream may outlive the deadline.
    void outcome.then((result) => {
      if (!result.ok && !(result.failure.source === 'engine' && result.failure.code === 'TIMEOUT')) stream.cut(`handler failed: ${result.failure.message}`);
    });
    const ended = stream.ended.then((end) => {
      this.registry.release(this.reservation, this.requestBodyId);
      this.giveReservedBytes();
      this.requestBody?.destroy('response ended');
      return end;
    });
    return { kind: 'streaming', ended };
  }

  private feedBody(channel: Channel, source: RequestBodySource | undefined): void {
    const input = channel.attachWriter(
      source?.kind === 'streamed' ? { pause: () => source.req.pause(), resume: () => source.req.resume(), abort: () => source.req.pause() } : BUFFERED_BODY,
    );
    if (input === undefined) return;
    if (source === undefined || source.kind === 'buffered') {
      if (source !== undefined && source.bytes.length > 0) input.push(source.bytes, true);
      input.end('complete', 'stream_complete');
      this.bodyConsumed = true;
      return;
    }
    const { req } = source;
    const track = this.closed ? undefined : this.streamHeap?.track();
    this.uploadTrack = track;
    if (track === undefined) {
      req.on('data', (chunk: Buffer) => input.push(chunk, true));
    } else {
      req.on('data', (chunk: Buffer) => {
        track.moved(chunk.length);
        input.push(chunk, true);
      });
      req.once('close', () => track.end());
    }
    req.once('end', () => {
      this.bodyConsumed = true;
      track?.end();
      input.end('complete', 'stream_complete');
    });
    req.once('aborted', () => {
      track?.end();
      input.end('aborted', 'the HTTP client went away during the upload');
    });
    req.once('error', () => {
      track?.end();
      input.end('aborted', 'the HTTP request failed during the upload');
    });
  }
}

/** The promise's value, or undefined once `ms` passed first (the timer is cleared either way). */
function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), Math.max(0, ms));
    void promise.then((value) => {
      clearTimeout(timer);
      resolve(value);
    });
  });
}
