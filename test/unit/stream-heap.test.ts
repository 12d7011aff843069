import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ChannelRegistry } from '../../src/channels/channel-registry.js';
import { RequestChannels } from '../../src/http/request-channels.js';
import { ResponseStream } from '../../src/http/response-stream.js';
import { growingPercentOf, STREAM_HEAP_BYTES, STREAM_HEAP_WINDOW_MS, StreamHeapGrowth } from '../../src/http/stream-heap.js';

const silent = pino({ level: 'silent' });
const CHILD_FLAGS = ['--heap-growing-percent=50', '--min-semi-space-size=16', '--max-semi-space-size=16'];

/** A control whose settings are recorded instead of given to V8. */
function recorded(raised = 200, execArgv: readonly string[] = CHILD_FLAGS): { heap: StreamHeapGrowth; set: number[] } {
  const set: number[] = [];
  // Date.now: the clock vitest's fake timers move.
  const heap = StreamHeapGrowth.forProcess(raised, execArgv, (percent) => set.push(percent), () => Date.now());
  if (heap === undefined) throw new Error('expected a control');
  return { heap, set };
}

describe('StreamHeapGrowth', () => {
  it('reads the process\'s own factor from its flags, the last one winning, in either spelling', () => {
    expect(growingPercentOf(CHILD_FLAGS)).toBe(50);
    expect(growingPercentOf(['--heap_growing_percent=30', '--max-old-space-size=512', '--heap-growing-percent=70'])).toBe(70);
    expect(growingPercentOf(['--max-semi-space-size=16'])).toBeUndefined();
    expect(growingPercentOf(['--heap-growing-percent=fast'])).toBeUndefined();
  });

  it('does nothing when turned off, when the flags set no factor, or one already as high', () => {
    expect(StreamHeapGrowth.forProcess(0, CHILD_FLAGS)).toBeUndefined();
    expect(StreamHeapGrowth.forProcess(200, [])).toBeUndefined();
    expect(StreamHeapGrowth.forProcess(200, ['--heap-growing-percent=0'])).toBeUndefined();
    expect(StreamHeapGrowth.forProcess(200, ['--heap-growing-percent=200'])).toBeUndefined();
    expect(StreamHeapGrowth.forProcess(200, ['--heap-growing-percent=150'])?.basePercent).toBe(150);
  });

  afterEach(() => {
    vi.useRealTimers();
  });

  it('raises the factor for the first stream past the mark and sets the process\'s own back after the last ends', () => {
    const { heap, set } = recorded();
    const first = heap.track();
    const second = heap.track();
    first.moved(STREAM_HEAP_BYTES - 1);
    expect(set).toEqual([]);
    first.moved(1);
    second.moved(STREAM_HEAP_BYTES);
    expect(set).toEqual([200]);
    expect(heap.streams).toBe(2);
    first.end();
    first.end();
    expect(set).toEqual([200]);
    expect(heap.streams).toBe(1);
    second.end();
    expect(set).toEqual([200, 50]);
    expect(heap.streams).toBe(0);
    const third = heap.track();
    third.moved(STREAM_HEAP_BYTES);
    third.end();
    third.moved(STREAM_HEAP_BYTES);
    expect(set).toEqual([200, 50, 200, 50]);
    expect(heap.raises).toBe(2);
  });

  it('lets a stream that slows down go after a whole window, and raises it again when it speeds up', () => {
    vi.useFakeTimers();
    const { heap, set } = recorded();
    const stream = heap.track();
    stream.moved(STREAM_HEAP_BYTES);
    // The first look after the raise leaves it (it may have been raised just before it).
    vi.advanceTimersByTime(STREAM_HEAP_WINDOW_MS);
    expect(heap.streams).toBe(1);
    // A window in which it keeps the pace keeps it; one in which it does not lets it go.
    stream.moved(STREAM_HEAP_BYTES);
    vi.advanceTimersByTime(STREAM_HEAP_WINDOW_MS);
    expect(heap.streams).toBe(1);
    stream.moved(STREAM_HEAP_BYTES - 1);
    vi.advanceTimersByTime(STREAM_HEAP_WINDOW_MS);
    expect(heap.streams).toBe(0);
    expect(set).toEqual([200, 50]);
    // Slow (half the mark a window) it is not raised again; at the pace it is.
    for (let i = 0; i < 4; i++) {
      stream.moved(STREAM_HEAP_BYTES / 2 - 1);
      vi.advanceTimersByTime(STREAM_HEAP_WINDOW_MS + 1);
    }
    expect(set).toEqual([200, 50]);
    stream.moved(STREAM_HEAP_BYTES);
    expect(set).toEqual([200, 50, 200]);
    stream.end();
    expect(set).toEqual([200, 50, 200, 50]);
    // No look is left scheduled once nothing holds it.
    expect(vi.getTimerCount()).toBe(0);
  });
});

/** An upload as the pipeline hands it over: a readable request whose pieces the test emits. */
function upload(): IncomingMessage & EventEmitter {
  const req = new EventEmitter() as IncomingMessage & EventEmitter;
  Object.assign(req, { pause: () => req, resume: () => req, complete: false });
  return req;
}

const res = { headersSent: false, destroyed: false, on: () => undefined, once: () => undefined } as unknown as ServerResponse;
const piece = Buffer.alloc(256 * 1024, 1);

describe('RequestChannels: a streamed upload and the heap growing factor', () => {
  const start = (heap: StreamHeapGrowth) => {
    const req = upload();
    const channels = new RequestChannels(new ChannelRegistry('p', silent), { kind: 'streamed', req }, res, {}, false, 0, heap);
    return { req, channels };
  };

  it('holds the raised factor once the upload passes the threshold, and lets it go when the upload ends', () => {
    const { heap, set } = recorded();
    const { req } = start(heap);
    for (let sent = piece.length; sent < STREAM_HEAP_BYTES; sent += piece.length) req.emit('data', piece);
    expect(heap.streams).toBe(0);
    req.emit('data', piece);
    req.emit('data', piece);
    expect(heap.streams).toBe(1);
    req.emit('end');
    expect(heap.streams).toBe(0);
    req.emit('close');
    expect(set).toEqual([200, 50]);
  });

  it('lets it go when the client goes away mid-upload, or when the request is over first', () => {
    for (const stop of ['aborted', 'close', 'error', 'channels closed'] as const) {
      const { heap } = recorded();
      const { req, channels } = start(heap);
      for (let sent = 0; sent < 2 * STREAM_HEAP_BYTES; sent += piece.length) req.emit('data', piece);
      expect(heap.streams).toBe(1);
      if (stop === 'channels closed') channels.close('request timed out');
      else req.emit(stop, new Error('cut'));
      expect(heap.streams, stop).toBe(0);
    }
  });

  it('leaves the factor alone for an upload under the threshold', () => {
    const { heap, set } = recorded();
    const { req } = start(heap);
    req.emit('data', Buffer.alloc(STREAM_HEAP_BYTES - 1));
    req.emit('end');
    expect(set).toEqual([]);
  });
});

describe('ResponseStream: a streamed response and the heap growing factor', () => {
  /** A response that takes every write; `close` is what the client going away emits. */
  function response(): ServerResponse & EventEmitter {
    const emitter = new EventEmitter();
    return Object.assign(emitter, {
      destroyed: false,
      req: { complete: true },
      setHeader: () => undefined,
      writeHead: () => undefined,
      write: () => true,
      end: () => undefined,
      destroy: () => undefined,
    }) as unknown as ServerResponse & EventEmitter;
  }

  it('holds the raised factor past the threshold until the stream completes', () => {
    const { heap, set } = recorded();
    const stream = new ResponseStream(response(), {}, false, heap);
    for (let sent = 0; sent <= STREAM_HEAP_BYTES; sent += piece.length) stream.write(piece, true, () => undefined);
    expect(heap.streams).toBe(1);
    stream.end('complete', 'stream_complete');
    expect(heap.streams).toBe(0);
    expect(set).toEqual([200, 50]);
  });

  it('lets it go when the client goes away mid-stream, and never holds it for a short response', () => {
    const { heap } = recorded();
    const res = response();
    const stream = new ResponseStream(res, {}, false, heap);
    for (let sent = 0; sent <= STREAM_HEAP_BYTES; sent += piece.length) stream.write(piece, true, () => undefined);
    expect(heap.streams).toBe(1);
    res.emit('close');
    expect(heap.streams).toBe(0);
    const short = new ResponseStream(response(), {}, false, heap);
    short.write(Buffer.from('{"ok":true}'), true, () => undefined);
    short.end('complete', 'stream_complete');
    expect(heap.raises).toBe(1);
  });
});
