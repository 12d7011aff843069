import type { Duplex } from 'node:stream';
import type WebSocket from 'ws';

/**
 * What one worker listener's sockets hold, in one process, in WebSocket messages not yet received
 * whole (`max_partial_frame_bytes`, docs/security.md#connections). ws buffers a message until its
 * last byte is in and gives no hook before that, so a peer that sends 15 MiB of a 16 MiB frame and
 * stops holds 15 MiB of the process for as long as it stays connected; many such peers grow it
 * without bound. This budget counts those bytes for every socket of the listener after each read
 * (one budget per listener: a public listener's tenants cannot close a trusted listener's workers'
 * large frames), and past `maxBytes` closes the
 * socket whose unfinished message is oldest (a peer that stalls mid-message grows old; one that
 * streams large frames completes them and is young again after each).
 */

/**
 * What a buffered chunk costs beyond its bytes, as counted: a 1-byte read held by ws costs ~760
 * bytes of RSS (its Buffer, ArrayBuffer and backing store; measured on Node 20), so a peer that
 * dribbles a frame one byte per read would otherwise hold hundreds of times what it sent.
 */
export const CHUNK_COST_BYTES = 1024;

/** ws's receiver, as far as this module reads it (ws 8; test/unit/partial-frames.test.ts pins it). */
interface ReceiverInternals {
  _bufferedBytes: number;
  _buffers: readonly Buffer[];
  _fragments: readonly Buffer[];
  /** ws's running sum of `_fragments`' lengths (set as each fragment is pushed, 0 when a message ends). */
  _messageLength: number;
  writableLength: number;
}

function receiverOf(ws: WebSocket): ReceiverInternals | undefined {
  const receiver = (ws as unknown as { _receiver?: Partial<ReceiverInternals> })._receiver;
  if (receiver === undefined || typeof receiver._bufferedBytes !== 'number' || typeof receiver._messageLength !== 'number' || !Array.isArray(receiver._buffers) || !Array.isArray(receiver._fragments)) return undefined;
  return receiver as ReceiverInternals;
}

/**
 * Bytes ws holds for `ws` in messages not yet complete: the chunks it has read and not parsed yet
 * (a frame's payload stays there until its last byte arrives), the fragments of an unfinished
 * fragmented message, and chunks waiting to be written to its parser; each chunk and fragment also
 * costs CHUNK_COST_BYTES. Undefined when ws's receiver is not the shape this module knows.
 */
export function partialFrameBytes(ws: WebSocket): number | undefined {
  const receiver = receiverOf(ws);
  if (receiver === undefined) return undefined;
  // ws keeps the fragments' total itself (`_messageLength`): summing them here on every read was
  // quadratic in the number of fragments (up to max(1024, max_frame_bytes / 1 KiB) per message).
  return receiver._bufferedBytes + receiver.writableLength + receiver._messageLength + (receiver._buffers.length + receiver._fragments.length) * CHUNK_COST_BYTES;
}

interface Holder {
  ws: WebSocket;
  /** Bytes counted for it at its last read. */
  held: number;
  /** When its unfinished message began, or it last completed one: the oldest is closed first. */
  progressAt: number;
  /** Bytes read since its last complete message: the count used if ws's internals are unknown. */
  sinceMessage: number;
}

export interface PartialFrameEvents {
  /** A socket was closed to keep the process under the budget. */
  onEvicted?: (held: number, total: number) => void;
}

export class PartialFrameBudget {
  private readonly holders = new Map<WebSocket, Holder>();
  private total = 0;
  private clock = 0;

  constructor(
    readonly maxBytes: number,
    private readonly events: PartialFrameEvents = {},
  ) {}

  /** Bytes counted now over every tracked socket. */
  get held(): number {
    return this.total;
  }

  /** Sockets tracked (open worker-listener sockets). */
  get size(): number {
    return this.holders.size;
  }

  /**
   * Counts `ws` (on the raw `socket` it was upgraded from) until it closes. Call right after the
   * upgrade: ws's own data listener comes first, so each read is counted once ws has parsed it.
   */
  track(ws: WebSocket, socket: Duplex): void {
    const holder: Holder = { ws, held: 0, progressAt: ++this.clock, sinceMessage: 0 };
    this.holders.set(ws, holder);
    const onData = (chunk: Buffer): void => {
      holder.sinceMessage += chunk.length + CHUNK_COST_BYTES;
      this.update(holder);
    };
    socket.on('data', onData);
    ws.on('message', () => {
      holder.progressAt = ++this.clock;
      holder.sinceMessage = 0;
    });
    ws.once('close', () => {
      socket.off('data', onData);
      this.release(holder);
    });
  }

  private update(holder: Holder): void {
    if (!this.holders.has(holder.ws)) return;
    const held = partialFrameBytes(holder.ws) ?? holder.sinceMessage;
    // A new message begins: a worker idle for hours is as young as any when it starts sending.
    if (holder.held === 0 && held > 0) holder.progressAt = ++this.clock;
    this.total += held - holder.held;
    holder.held = held;
    while (this.total > this.maxBytes) {
      const oldest = this.oldestHolding();
      if (oldest === undefined) break;
      const before = this.total;
      this.release(oldest);
      // Mid-message there is no room for a close frame's handshake: the socket is cut at once.
      oldest.ws.terminate();
      this.events.onEvicted?.(oldest.held, before);
    }
  }

  private oldestHolding(): Holder | undefined {
    let oldest: Holder | undefined;
    for (const holder of this.holders.values()) {
      if (holder.held > 0 && (oldest === undefined || holder.progressAt < oldest.progressAt)) oldest = holder;
    }
    return oldest;
  }

  private release(holder: Holder): void {
    if (!this.holders.delete(holder.ws)) return;
    this.total -= holder.held;
  }
}
