import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Channel } from '../channels/channel.js';
import type { ChannelRegistry } from '../channels/channel-registry.js';
import type { InvocationOutcome } from '../invocation/invoker.js';
import type { StreamEnd, StreamStart } from './response-stream.js';
import { ResponseStream } from './response-stream.js';

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

/** A request's channels once a worker opened one of them. */
interface Opened {
  requestBody: Channel;
  response: Channel;
  stream: ResponseStream;
}

type First = { from: 'outcome'; value: InvocationOutcome } | { from: 'stream'; start: StreamStart };

/**
 * The channels are made when the worker first claims one of them (ChannelRegistry.reserve): until
 * then the request holds two reserved ids and a key. Most handlers return their ApiResponse without
 * touching either channel, and making them for every request cost about 1.4 µs of CPU per request
 * more (docs/performance.md, "Second session of 2026-11-26"). A streamed upload opens them at once:
 * its body flows into `request_body` as it arrives.
 */
export class RequestChannels {
  private readonly key = randomUUID();
  private readonly ids: string[];
  private opened: Opened | undefined;
  private done = false;
  /** Told when the response stream starts, if the channels open while the engine waits for that. */
  private onStart: ((start: StreamStart) => void) | undefined;
  /** The whole body reached the channel, or never needed to (the connection can be reused). */
  private bodyConsumed: boolean;

  constructor(
    private readonly registry: ChannelRegistry,
    private readonly source: RequestBodySource | undefined,
    private readonly res: ServerResponse,
    private readonly engineHeaders: Record<string, string>,
    private readonly headOnly: boolean,
    /** The stream_body_limit; 0 is none. */
    private readonly maxStreamedBytes: number,
  ) {
    // One key for both: whoever holds one ref of this request holds the other.
    this.ids = registry.reserve(this.key, () => this.open());
    this.bodyConsumed = source?.kind !== 'streamed';
    if (source?.kind === 'streamed') this.open();
  }

  /** The refs spliced into the handler's ApiRequest, as iii names them (ids and keys need no escaping). */
  refsJson(): string {
    const { ids, key } = this;
    return (
      `"request_body":{"channel_id":"${ids[0] as string}","access_key":"${key}","direction":"read"},` +
      `"response":{"channel_id":"${ids[1] as string}","access_key":"${key}","direction":"write"}`
    );
  }

  /** Whether the connection may carry another request (no upload was left unread). */
  get bodyFullyRead(): boolean {
    return this.bodyConsumed;
  }

  /**
   * Races the handler's outcome against its response channel (docs/streaming.md#which-wins): a body
   * on the channel wins; a non-empty result wins; a result of nothing waits for the channel.
   */
  async answer(outcome: Promise<InvocationOutcome>, deadline: number): Promise<HandlerAnswer> {
    const first = await this.first(outcome);
    if (first.from === 'stream') {
      const { start } = first;
      if (start.kind === 'streaming') return this.streaming(outcome);
      if (start.kind === 'empty') {
        this.close('response sent');
        return { kind: 'empty', status: start.status, headers: start.headers };
      }
      // The worker's socket died before any body: its handler's outcome says what happened.
      return { kind: 'outcome', outcome: await outcome };
    }
    const result = first.value;
    if (!result.ok || (result.value !== undefined && result.value !== null)) {
      this.close('handler answered');
      return { kind: 'outcome', outcome: result };
    }
    // Nothing returned: the answer is on the response channel, if the worker opened it.
    const writing = this.opened?.response.isClaimed('write') ?? false;
    const waitMs = Math.min(deadline - performance.now(), writing ? Number.POSITIVE_INFINITY : RESPONSE_ATTACH_GRACE_MS);
    const start = await within(this.started(), waitMs);
    if (start !== undefined && start.kind === 'streaming') return this.streaming(outcome);
    if (start !== undefined && start.kind === 'empty') {
      this.close('response sent');
      return { kind: 'empty', status: start.status, headers: start.headers };
    }
    this.close('handler answered nothing');
    return { kind: 'outcome', outcome: result };
  }

  /** Destroys both channels, or gives up their ids (the request is over); a worker that opens them later is refused. */
  close(reason: string): void {
    if (this.done) return;
    this.done = true;
    const opened = this.opened;
    if (opened === undefined) {
      this.registry.release(this.ids);
      return;
    }
    opened.requestBody.destroy(reason);
    if (!opened.stream.isStreaming) opened.response.destroy(reason);
  }

  /** The outcome, or the response stream starting, whichever comes first. */
  private first(outcome: Promise<InvocationOutcome>): Promise<First> {
    const opened = this.opened;
    if (opened !== undefined) {
      return Promise.race([outcome.then((value) => ({ from: 'outcome' as const, value })), opened.stream.started.then((start) => ({ from: 'stream' as const, start }))]);
    }
    return new Promise((resolve) => {
      void outcome.then((value) => resolve({ from: 'outcome', value }));
      this.onStart = (start) => resolve({ from: 'stream', start });
    });
  }

  /** Settles when the response stream starts; never, if the channels are never opened. */
  private started(): Promise<StreamStart> {
    const opened = this.opened;
    if (opened !== undefined) return opened.stream.started;
    return new Promise((resolve) => {
      this.onStart = resolve;
    });
  }

  /** Makes the channels (a worker claimed one of them, or the body is an upload). */
  private open(): void {
    if (this.opened !== undefined || this.done) return;
    const [bodyId, responseId] = this.ids as [string, string];
    const requestBody = this.registry.create(this.maxStreamedBytes > 0 ? { maxBytesIn: this.maxStreamedBytes } : {}, this.key, bodyId);
    const response = this.registry.create({}, this.key, responseId);
    const stream = new ResponseStream(this.res, this.engineHeaders, this.headOnly);
    const feedback = response.attachReader(stream);
    if (feedback !== undefined) stream.bind(feedback);
    this.opened = { requestBody, response, stream };
    this.feedBody(requestBody, this.source);
    const onStart = this.onStart;
    if (onStart !== undefined) void stream.started.then(onStart);
  }

  private streaming(outcome: Promise<InvocationOutcome>): HandlerAnswer {
    const { requestBody, stream } = this.opened as Opened;
    // The handler may go on after the body started (SSE); a failure of it cuts the stream, since its
    // writer would otherwise never close. A timeout does not: a stream may outlive the deadline.
    void outcome.then((result) => {
      if (!result.ok && !(result.failure.source === 'engine' && result.failure.code === 'TIMEOUT')) stream.cut(`handler failed: ${result.failure.message}`);
    });
    const ended = stream.ended.then((end) => {
      requestBody.destroy('response ended');
      return end;
    });
    return { kind: 'streaming', ended };
  }

  private feedBody(requestBody: Channel, source: RequestBodySource | undefined): void {
    const input = requestBody.attachWriter(
      source?.kind === 'streamed' ? { pause: () => source.req.pause(), resume: () => source.req.resume(), abort: () => source.req.pause() } : BUFFERED_BODY,
    );
    if (input === undefined) return;
    if (source === undefined || source.kind === 'buffered') {
      if (source !== undefined && source.bytes.length > 0) input.push(source.bytes, true);
      input.end('complete', 'stream_complete');
      return;
    }
    const { req } = source;
    req.on('data', (chunk: Buffer) => input.push(chunk, true));
    req.once('end', () => {
      this.bodyConsumed = true;
      input.end('complete', 'stream_complete');
    });
    req.once('aborted', () => input.end('aborted', 'the HTTP client went away during the upload'));
    req.once('error', () => input.end('aborted', 'the HTTP request failed during the upload'));
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
