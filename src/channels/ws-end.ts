import type { Duplex } from 'node:stream';
import WebSocket from 'ws';
import type { Channel, ChannelDirection, ChannelReader, ReaderFeedback, WriterInput } from './channel.js';
import type { ActivityMark } from './channel-activity.js';

/**
 * A worker's channel WebSocket as one end of a channel (docs/streaming.md#the-channel-socket), with the
 * close codes iii-sdk's ChannelReader/ChannelWriter use: a writer that closes with 1000
 * (`stream_complete`, `channel_close`) completed; any other close, or none, aborted it.
 */

/** Past this many bytes queued towards the worker, the channel stops handing it items until drained. */
const SEND_HIGH_WATER_BYTES = 1024 * 1024;

/** Close code of a normal end (RFC 6455 §7.4.1). */
export const CLOSE_NORMAL = 1000;
export const CLOSE_GOING_AWAY = 1001;

export const toBuffer = (data: WebSocket.RawData): Buffer =>
  Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);

/**
 * Fails a reading worker's socket so that its SDK sees an error rather than a clean end: a truncated
 * upload must not look complete. iii-sdk's ChannelReader ends its stream normally on any close frame
 * and only surfaces `error` events, which `ws` raises for protocol violations; a close frame carrying
 * 1006 (a code that must never be sent) is one, and its reason tells what happened.
 */
export function failSocket(raw: Duplex, reason: string): void {
  const text = Buffer.from(reason.slice(0, 100));
  const frame = Buffer.alloc(4 + text.length);
  frame[0] = 0x88; // FIN + close
  frame[1] = 2 + text.length;
  frame.writeUInt16BE(1006, 2);
  text.copy(frame, 4);
  if (!raw.destroyed && raw.writable) raw.end(frame);
  setTimeout(() => raw.destroy(), 1000).unref();
}

/** A socket nobody asks about. */
const UNTRACKED: ActivityMark = Object.freeze({ moved: () => undefined, closed: () => undefined });

/**
 * Attaches a worker's channel socket to `channel` as the end it asked for; false when that end is
 * taken. `activity` hears of every frame the worker sends or takes (the heartbeat counts it as a sign
 * of life: channel-activity.ts) and of the socket's close.
 */
export function attachWebSocket(
  ws: WebSocket,
  raw: Duplex,
  channel: Pick<Channel, 'attachReader' | 'attachWriter' | 'byteStream'>,
  direction: ChannelDirection,
  activity: ActivityMark = UNTRACKED,
): boolean {
  const attached = direction === 'read' ? attachAsReader(ws, raw, channel, activity) : attachAsWriter(ws, channel, activity);
  if (attached) ws.once('close', () => activity.closed());
  else activity.closed();
  return attached;
}

function attachAsReader(ws: WebSocket, raw: Duplex, channel: Pick<Channel, 'attachReader' | 'byteStream'>, activity: ActivityMark): boolean {
  let ended = false;
  const bound: { feedback?: ReaderFeedback } = {};
  const joined = channel.byteStream ? new JoinedFrames(ws, raw) : undefined;
  const reader: ChannelReader = {
    write: (data, binary, flushed) => {
      if (ws.readyState !== WebSocket.OPEN) {
        flushed();
        return true;
      }
      activity.moved();
      if (joined !== undefined && binary) joined.add(data, flushed);
      else {
        joined?.send();
        ws.send(data, { binary }, flushed);
      }
      // Past the high-water mark nothing more is handed over until the worker reads: a stopped
      // worker fills its buffers, then nothing moves.
      if (ws.bufferedAmount < SEND_HIGH_WATER_BYTES) return true;
      raw.once('drain', () => bound.feedback?.drained());
      return false;
    },
    end: (status, reason) => {
      ended = true;
      if (status === 'complete') {
        joined?.send();
        ws.close(CLOSE_NORMAL, 'stream_complete');
      } else {
        // Not written: the worker is to see an error, and the channel gives their budget back.
        joined?.drop();
        failSocket(raw, reason);
      }
    },
  };
  const feedback = channel.attachReader(reader);
  if (feedback === undefined) return false;
  bound.feedback = feedback;
  // A reading socket sends nothing but its close; anything else is ignored, as iii does.
  ws.on('close', () => {
    if (!ended) feedback.gone('the worker closed its reading socket');
  });
  ws.on('error', () => undefined);
  return true;
}

/** The most bytes joined into one frame: well under any SDK's message limit (Python's websockets: 1 MiB). */
const JOINED_FRAME_BYTES = 256 * 1024;

/**
 * Binary items of a byte stream handed to a worker's reading socket in one go (the body pieces one
 * socket read of the HTTP request yields: a chunked body splits most reads in two) leave as one
 * binary frame at the end of that tick: one frame header and one `writev` for all of them, no copy,
 * and one message for the worker's SDK to take instead of several. Nothing waits longer than the
 * tick that handed it over, and a piece that would pass the high-water mark is written at once, so
 * the socket's `drain` reports it. Frames are unmasked (server to client, RFC 6455 §5.1) and written
 * on the socket directly, in order with what `ws` writes (with compression off it writes at once).
 */
class JoinedFrames {
  private parts: Buffer[] = [];
  private callbacks: (() => void)[] = [];
  private bytes = 0;
  private scheduled = false;
  private readonly sendLater = (): void => {
    this.scheduled = false;
    this.send();
  };

  constructor(
    private readonly ws: WebSocket,
    private readonly raw: Duplex,
  ) {}

  add(data: Buffer, flushed: () => void): void {
    if (this.bytes + data.length > JOINED_FRAME_BYTES) this.send();
    this.parts.push(data);
    this.callbacks.push(flushed);
    this.bytes += data.length;
    if (this.ws.bufferedAmount + this.bytes >= SEND_HIGH_WATER_BYTES) this.send();
    else if (!this.scheduled) {
      this.scheduled = true;
      process.nextTick(this.sendLater);
    }
  }

  /** Forgets what was joined and not written (the stream was cut). */
  drop(): void {
    this.parts = [];
    this.callbacks = [];
    this.bytes = 0;
  }

  /** Writes what was joined so far (before anything else is written on the socket). */
  send(): void {
    const { parts, callbacks, bytes } = this;
    if (parts.length === 0) return;
    this.parts = [];
    this.callbacks = [];
    this.bytes = 0;
    const flushed = callbacks.length === 1 ? (callbacks[0] as () => void) : () => callbacks.forEach((callback) => callback());
    if (this.ws.readyState !== WebSocket.OPEN) flushed();
    else if (parts.length === 1) this.ws.send(parts[0] as Buffer, { binary: true }, flushed);
    else {
      const raw = this.raw;
      raw.cork();
      raw.write(binaryFrameHeader(bytes));
      for (let i = 0; i < parts.length - 1; i++) raw.write(parts[i]);
      raw.write(parts[parts.length - 1], flushed);
      raw.uncork();
    }
  }
}

/** The header of one unmasked, final binary frame of `length` bytes (RFC 6455 §5.2). */
function binaryFrameHeader(length: number): Buffer {
  const header = Buffer.allocUnsafe(length < 126 ? 2 : length < 65536 ? 4 : 10);
  header[0] = 0x82; // FIN + binary
  if (length < 126) header[1] = length;
  else if (length < 65536) {
    header[1] = 126;
    header.writeUInt16BE(length, 2);
  } else {
    header[1] = 127;
    header.writeUInt32BE(0, 2);
    header.writeUInt32BE(length, 6);
  }
  return header;
}

function attachAsWriter(ws: WebSocket, channel: Pick<Channel, 'attachWriter'>, activity: ActivityMark): boolean {
  let input: WriterInput | undefined;
  input = channel.attachWriter({
    pause: () => ws.pause(),
    resume: () => ws.resume(),
    abort: (reason) => {
      input = undefined;
      if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close(CLOSE_GOING_AWAY, reason.slice(0, 100));
    },
  });
  if (input === undefined) return false;
  ws.on('message', (data: WebSocket.RawData, isBinary: boolean) => {
    activity.moved();
    input?.push(toBuffer(data), isBinary);
  });
  ws.on('close', (code: number, reason: Buffer) => {
    const text = reason.toString('utf8');
    if (code === CLOSE_NORMAL) input?.end('complete', text || 'closed');
    else input?.end('aborted', `the worker's writing socket closed with ${code}${text === '' ? '' : ` (${text})`}`);
    input = undefined;
  });
  ws.on('error', () => undefined);
  return true;
}
