import type { Socket } from 'node:net';
import { decodeBody, encodeFrame, FrameDecoder } from '../forwarding/forward-frames.js';
import type { Channel, ChannelDirection, ChannelEndStatus, WriterInput } from './channel.js';

/**
 * One channel end carried between two engine processes over a dedicated forward connection, after
 * its handshake (docs/streaming.md#across-the-cluster). Frames are the forward wire's (length +
 * msgpack): `[0, binary, payload]` is an item, `[1, status, reason]` ends the stream (from the
 * writing side) or gives up on it (from the reading side). Back-pressure is TCP's: a full socket
 * pauses the channel, a paused channel stops reading the socket.
 */
const ITEM = 0;
const END = 1;
/** A chunk is at most a worker frame (16 MiB by default); a frame carries one chunk plus a few bytes. */
const MAX_LINK_FRAME_BYTES = 64 * 1024 * 1024;

type LinkMessage = { kind: 'item'; data: Buffer; binary: boolean } | { kind: 'end'; status: ChannelEndStatus; reason: string };

function decodeLinkMessage(decoded: unknown): LinkMessage | undefined {
  if (!Array.isArray(decoded)) return undefined;
  const value = decoded as unknown[];
  if (value[0] === ITEM && typeof value[1] === 'boolean' && Buffer.isBuffer(value[2])) return { kind: 'item', binary: value[1], data: value[2] };
  if (value[0] === END && (value[1] === 'complete' || value[1] === 'aborted') && typeof value[2] === 'string') {
    return { kind: 'end', status: value[1], reason: value[2] };
  }
  return undefined;
}

const itemFrame = (data: Buffer, binary: boolean): Buffer => encodeFrame([ITEM, binary, data], MAX_LINK_FRAME_BYTES);
const endFrame = (status: ChannelEndStatus, reason: string): Buffer => encodeFrame([END, status, reason.slice(0, 200)]);

/** Reads link messages off the socket; a malformed stream ends the link. */
function onMessages(socket: Socket, handle: (message: LinkMessage) => void): void {
  const decoder = new FrameDecoder(MAX_LINK_FRAME_BYTES);
  socket.on('data', (chunk: Buffer) => {
    try {
      decoder.push(chunk, (body) => {
        const message = decodeLinkMessage(decodeBody(body));
        if (message === undefined) throw new Error('malformed channel link frame');
        handle(message);
      });
    } catch {
      socket.destroy();
    }
  });
}

/**
 * Attaches the link to `channel` in `role`: `read` takes items out of the channel and sends them over
 * the socket; `write` puts the items that arrive on the socket into the channel. Returns false when
 * that end of the channel is already taken.
 */
export function attachTunnelLink(socket: Socket, channel: Pick<Channel, 'attachReader' | 'attachWriter'>, role: ChannelDirection): boolean {
  socket.setNoDelay(true);
  socket.on('error', () => undefined);
  return role === 'read' ? attachSending(socket, channel) : attachReceiving(socket, channel);
}

function attachSending(socket: Socket, channel: Pick<Channel, 'attachReader'>): boolean {
  let ended = false;
  const feedback = channel.attachReader({
    write: (data, binary, flushed) => {
      if (socket.destroyed) {
        flushed();
        return true;
      }
      if (socket.write(itemFrame(data, binary), flushed)) return true;
      socket.once('drain', () => feedback?.drained());
      return false;
    },
    end: (status, reason) => {
      ended = true;
      if (!socket.destroyed) socket.end(endFrame(status, reason));
    },
  });
  if (feedback === undefined) return false;
  // The far side only ever sends an end here: its reader gave up.
  onMessages(socket, (message) => {
    if (message.kind === 'end' && !ended) {
      ended = true;
      feedback.gone(message.reason);
      socket.end();
    }
  });
  socket.on('close', () => {
    if (!ended) feedback.gone('the link to the other process closed');
  });
  return true;
}

function attachReceiving(socket: Socket, channel: Pick<Channel, 'attachWriter'>): boolean {
  let input: WriterInput | undefined;
  input = channel.attachWriter({
    pause: () => socket.pause(),
    resume: () => socket.resume(),
    abort: (reason) => {
      input = undefined;
      if (!socket.destroyed) socket.end(endFrame('aborted', reason));
    },
  });
  if (input === undefined) return false;
  onMessages(socket, (message) => {
    if (message.kind === 'item') {
      input?.push(message.data, message.binary);
      return;
    }
    input?.end(message.status, message.reason);
    input = undefined;
    socket.end();
  });
  socket.on('close', () => {
    input?.end('aborted', 'the link to the other process closed');
    input = undefined;
  });
  return true;
}
