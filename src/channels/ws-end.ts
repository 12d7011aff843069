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
  channel: Pick<Channel, 'attachReader' | 'attachWriter'>,
  direction: ChannelDirection,
  activity: ActivityMark = UNTRACKED,
): boolean {
  const attached = direction === 'read' ? attachAsReader(ws, raw, channel, activity) : attachAsWriter(ws, channel, activity);
  if (attached) ws.once('close', () => activity.closed());
  else activity.closed();
  return attached;
}

function attachAsReader(ws: WebSocket, raw: Duplex, channel: Pick<Channel, 'attachReader'>, activity: ActivityMark): boolean {
  let ended = false;
  const bound: { feedback?: ReaderFeedback } = {};
  const reader: ChannelReader = {
    write: (data, binary, flushed) => {
      if (ws.readyState !== WebSocket.OPEN) {
        flushed();
        return true;
      }
      // Past the high-water mark nothing more is handed over until the worker reads: a stopped
      // worker fills its buffers, then nothing moves.
      activity.moved();
      ws.send(data, { binary }, flushed);
      if (ws.bufferedAmount < SEND_HIGH_WATER_BYTES) return true;
      raw.once('drain', () => bound.feedback?.drained());
      return false;
    },
    end: (status, reason) => {
      ended = true;
      if (status === 'complete') ws.close(CLOSE_NORMAL, 'stream_complete');
      else failSocket(raw, reason);
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
